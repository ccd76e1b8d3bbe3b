// Python stack frames: inside VS Code's TensorBoard panel each frame is a link that
// asks VS Code to open the file at the line (util/vscode); elsewhere "file:line" is
// plain selectable text with a copy button.

import { useState } from "react";
import type { Frame } from "../api/types";
import { copyText } from "../util/csv";
import { buildJumpMessage, frameLocation, jumpToSource, vsCodeTarget } from "../util/vscode";

export function FrameItem({ frame }: { frame: Frame }) {
  const [copied, setCopied] = useState(false);
  const loc = frameLocation(frame.file, frame.line);
  const canJump = !!vsCodeTarget() && !!buildJumpMessage(frame.file, frame.line);
  return (
    <li className="frame">
      {frame.func && <span className="frame-func">{frame.func}</span>}
      {loc &&
        (canJump ? (
          <button
            type="button"
            className="link frame-loc"
            title="Open in VS Code"
            onClick={() => jumpToSource(frame.file, frame.line)}
          >
            {loc}
          </button>
        ) : (
          <>
            <span className="frame-loc selectable">{loc}</span>
            <button
              type="button"
              className="icon-btn"
              title="Copy file:line"
              aria-label={`Copy ${loc}`}
              onClick={async () => {
                if (await copyText(loc)) {
                  setCopied(true);
                  setTimeout(() => setCopied(false), 1200);
                }
              }}
            >
              {copied ? "✓" : "⧉"}
            </button>
          </>
        ))}
    </li>
  );
}

export function StackFrames({ frames }: { frames: Frame[] }) {
  if (!frames.length) return <div className="muted">No Python stack recorded for these calls (profile with with_stack=True).</div>;
  return (
    <ol className="frames" aria-label="Call stack, innermost first">
      {frames.map((f, i) => (
        <FrameItem key={i} frame={f} />
      ))}
    </ol>
  );
}
