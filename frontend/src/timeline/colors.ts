// Event colors: a stable hue per name (the same operator or kernel always gets the
// same color), lighter in light mode, darker in dark mode.

export function hashString(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

export function nameColor(name: string, dark: boolean): string {
  const h = hashString(name);
  const hue = h % 360;
  const sat = 45 + ((h >>> 9) % 25);
  const light = dark ? 38 + ((h >>> 17) % 12) : 68 + ((h >>> 17) % 12);
  return `hsl(${hue} ${sat}% ${light}%)`;
}

export interface Palette {
  bg: string;
  text: string;
  muted: string;
  grid: string;
  header: string;
  headerText: string;
  busy: string;
  select: string;
  flow: string;
  /** flows in view that do not touch the selection */
  flowFaint: string;
  range: string;
  ruler: string;
}

export function palette(dark: boolean): Palette {
  return dark
    ? {
        bg: "#1e1f22", text: "#e8e8e8", muted: "#9aa0a6", grid: "rgba(255,255,255,0.07)", header: "#2a2c31",
        headerText: "#d0d4da", busy: "rgba(140,160,190,0.55)", select: "#ffcc00", flow: "#ff9f43",
        flowFaint: "rgba(255,159,67,0.45)", range: "rgba(80,140,255,0.18)", ruler: "#25272b",
      }
    : {
        bg: "#ffffff", text: "#1f1f1f", muted: "#5f6368", grid: "rgba(0,0,0,0.06)", header: "#f1f3f4",
        headerText: "#3c4043", busy: "rgba(110,130,160,0.5)", select: "#d93025", flow: "#e8710a",
        flowFaint: "rgba(232,113,10,0.4)", range: "rgba(26,115,232,0.15)", ruler: "#f8f9fa",
      };
}

/** Fill of a counter track: device utilization green, memory blue. */
export function counterFill(kind: string | undefined, dark: boolean): string {
  if (kind === "utilization") return dark ? "rgba(129,201,149,0.55)" : "rgba(52,168,83,0.45)";
  return dark ? "rgba(115,192,222,0.45)" : "rgba(84,112,198,0.35)";
}
