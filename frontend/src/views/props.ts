// What the shell (App.tsx) hands every view: the URL state and the run / worker / span it
// resolved. The views import this, never App itself (App imports the views).

import type { AppState } from "../state/url";

export interface ViewProps {
  st: AppState;
  /** run / worker / span of the selection, as the API takes them */
  sel: { run: string; worker?: string; span?: string };
  dark: boolean;
}
