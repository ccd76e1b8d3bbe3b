// The Trace view's range box: type "step 17 +100ms..+110ms" (grammar: typedRange.ts), Enter
// selects that range (its statistics open, the view zooms to it) as a drag on the ruler does.
// Between edits the box shows the selected range, however it was chosen, in the same grammar,
// so it can be edited from there. A bad input leaves the selection as it was and says what
// was wrong under the box (as text: it may quote what was typed).

import { useEffect, useId, useRef, useState } from "react";
import { Name } from "../../components/Name";
import type { Range } from "../../timeline/coords";
import type { StepSpan } from "../../timeline/steps";
import { formatTypedRange, parseTypedRange } from "./typedRange";

export function TypedRangeBox({ steps, bounds, range, onRange }: {
  /** null while the steps are loading */
  steps: readonly StepSpan[] | null;
  bounds: Range;
  /** the selected range, null none */
  range: Range | null;
  onRange: (r: Range) => void;
}) {
  const [text, setText] = useState(() => (range ? formatTypedRange(range, steps) : ""));
  const [error, setError] = useState<string | null>(null);
  // typed and not yet applied: a range chosen elsewhere meanwhile does not overwrite it
  const editing = useRef(false);
  const errorId = useId();

  useEffect(() => {
    if (editing.current) return;
    setText(range ? formatTypedRange(range, steps) : "");
    setError(null);
  }, [range?.start, range?.end, steps]); // eslint-disable-line react-hooks/exhaustive-deps

  const apply = () => {
    const r = parseTypedRange(text, steps, bounds);
    if (!r.ok) {
      setError(r.error);
      return;
    }
    editing.current = false;
    setError(null);
    // the same range again still normalizes the text ("step 17 +10ms..+20ms" -> "+10.000ms")
    setText(formatTypedRange(r.range, steps));
    onRange(r.range);
  };

  const revert = () => {
    editing.current = false;
    setError(null);
    setText(range ? formatTypedRange(range, steps) : "");
  };

  return (
    <span className="typed-range">
      <input
        type="text"
        className="filter typed-range-input"
        value={text}
        maxLength={200}
        spellCheck={false}
        autoComplete="off"
        placeholder="Range: step 17 +100ms..+110ms"
        aria-label="Time range"
        aria-invalid={error !== null}
        aria-describedby={error !== null ? errorId : undefined}
        title="A time range to select: step 17 +100ms..+110ms, step 17, 100ms..110ms (from the trace start); units ns, us, ms, s. Enter selects it, Escape reverts"
        onChange={(e) => {
          editing.current = true;
          setText(e.target.value);
          setError(null);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter") {
            e.preventDefault();
            apply();
          } else if (e.key === "Escape") {
            e.preventDefault();
            revert();
          }
        }}
      />
      {error !== null && (
        <span id={errorId} className="typed-range-error" role="alert">
          <Name text={error} />
        </span>
      )}
    </span>
  );
}
