// Labels that more than one view shows: one definition each, so a figure named the same
// in two places is the same figure (issue 21, "one definition per label").

/** What "Step time" is, wherever a step's duration is shown (the Overview's Steps table,
 * the step outliers, the critical path): the analyses' one step boundary. */
export const STEP_TIME_TITLE =
  "From the step's start to the end of its last device work (the old plugin's step boundary), so a step's kernels count in it; the ProfilerStep#N event on the CPU ends earlier when the device lags";
