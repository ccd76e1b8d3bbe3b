// Python stack frames: inside VS Code's TensorBoard panel each frame is a link that
// asks VS Code to open the file at the line (util/vscode); elsewhere "file:line" is
// plain selectable text with a copy button. Either way the text shown is the frame as
// recorded; what is opened or copied is the absolute path the server resolved it to,
// when it found one (util/frames: openableFile).

import { useState } from "react";
import { copyText } from "../util/csv";
import { Name } from "./Name";
import type { SourceFrame } from "../api/types/frames";
import { isLibraryFrame, openableFile, shortFile } from "../util/frames";
import { buildJumpMessage, frameLocation, jumpToSource, vsCodeTarget } from "../util/vscode";

export function FrameItem({ frame }: { frame: SourceFrame }) {
  const [copied, setCopied] = useState(false);
  const loc = frameLocation(frame.file ? shortFile(frame.file) : frame.file, frame.line);
  const target = openableFile(frame);
  const full = frameLocation(target, frame.line);
  const canJump = !!vsCodeTarget() && !!buildJumpMessage(target, frame.line);
  return (
    <li className={isLibraryFrame(frame) ? "frame lib" : "frame"}>
      {frame.func && <Name className="frame-func" text={frame.func} />}
      {loc &&
        (canJump ? (
          <button
            type="button"
            className="link frame-loc"
            title={`Open ${full} in VS Code`}
            onClick={() => jumpToSource(target, frame.line)}
          >
            <Name text={loc} />
          </button>
        ) : (
          <>
            <span className="frame-loc selectable" title={full !== loc ? full : undefined}>
              <Name text={loc} />
            </span>
            <button
              type="button"
              className="icon-btn"
              title={`Copy ${full}`}
              aria-label={`Copy ${full}`}
              onClick={async () => {
                if (await copyText(full)) {
                  setCopied(true);
                  setTimeout(() => setCopied(false), 1200);
                }
              }}
            >
              {copied ? "✓" : <CopyIcon />}
            </button>
          </>
        ))}
    </li>
  );
}

/** Two overlapping sheets, drawn inline: the "⧉" glyph is missing from many fonts. */
function CopyIcon() {
  return (
    <svg width="12" height="12" viewBox="0 0 16 16" aria-hidden="true" fill="none" stroke="currentColor" strokeWidth="1.5">
      <rect x="5" y="5" width="9" height="9" rx="1.5" />
      <path d="M11 3V2.5A1 1 0 0 0 10 1.5H2.5a1 1 0 0 0-1 1V10a1 1 0 0 0 1 1H3" />
    </svg>
  );
}

/** The line over a stack that is not the calls' own: a backward op shows its forward op's
 * (the API's `stack_from`, "forward op aten::convolution"). */
export function stackFromLine(from: string): string {
  return `Stack of its ${from}`;
}

export function StackFrames({ frames, from }: { frames: SourceFrame[]; from?: string | null }) {
  if (!frames.length) return <div className="muted">No Python stack recorded for these calls (profile with with_stack=True).</div>;
  const list = (
    <ol className="frames" aria-label="Call stack, innermost first">
      {frames.map((f, i) => (
        <FrameItem key={i} frame={f} />
      ))}
    </ol>
  );
  if (!from) return list;
  return (
    <>
      <div className="muted stack-from" title="A backward op runs where autograd calls it: the model line that caused it is its forward op's">
        <Name text={stackFromLine(from)} />
      </div>
      {list}
    </>
  );
}
