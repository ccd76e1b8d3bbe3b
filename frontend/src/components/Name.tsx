// An untrusted name or path (event, kernel, operator, module, run, worker, file) as text:
// isolated in a <bdi> (its own direction, no effect on the text around it) and with its
// bidirectional-control characters shown as visible markers (util/bidi).

import { bidiMarker, hasBidiControls, splitBidi } from "../util/bidi";

export function Name({ text, className, title }: { text: string | null | undefined; className?: string; title?: string }) {
  const s = text ?? "";
  if (!hasBidiControls(s)) return <bdi className={className} title={title}>{s}</bdi>;
  return (
    <bdi className={"has-bidi " + (className ?? "")} title={title}>
      {splitBidi(s).map((p, i) =>
        p.control ? (
          <span key={i} className="bidi-ctl" title="A bidirectional-control character in the name">{bidiMarker(p.text)}</span>
        ) : (
          <span key={i}>{p.text}</span>
        ),
      )}
    </bdi>
  );
}
