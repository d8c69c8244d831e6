// Teams' host configuration for Adaptive Cards, light and dark: the values
// Microsoft publishes for Microsoft Teams with the Adaptive Cards project
// ("Host Config" samples of microsoft/AdaptiveCards, samples/HostConfig/
// microsoft-teams-light.json and microsoft-teams-dark.json, the same the
// Adaptive Cards Designer uses for its "Microsoft Teams" host). Colors are
// written as Teams gives them: #AARRGGBB where a transparency is meant.
// Only the shape is ours: the palettes are shared between container styles
// here, where the published files repeat them.

const spacing = { small: 8, default: 12, medium: 16, large: 20, extraLarge: 24, padding: 16 };
const sizes = { small: 12, default: 14, medium: 14, large: 18, extraLarge: 24 };
const weights = { lighter: 200, default: 400, bolder: 600 };

// palette maps each text color of a container to its default and subtle
// shades.
function palette(text, dark, accent, good, warning, attention, light) {
  const pair = (p) => ({ default: p[0], subtle: p[1] });
  return {
    default: pair(text),
    dark: pair(dark),
    light: pair(light),
    accent: pair(accent),
    good: pair(good),
    warning: pair(warning),
    attention: pair(attention),
  };
}

function config(styles) {
  return {
    choiceSetInputValueSeparator: ",",
    supportsInteractivity: true,
    spacing: spacing,
    separator: { lineThickness: 1, lineColor: "#EEEEEE" },
    imageSizes: { small: 32, medium: 52, large: 100 },
    fontTypes: {
      default: { fontFamily: "'Segoe UI', Tahoma, Geneva, Verdana, sans-serif", fontSizes: sizes, fontWeights: weights },
      monospace: { fontFamily: "'Courier New', Courier, monospace", fontSizes: sizes, fontWeights: weights },
    },
    textStyles: { heading: { fontType: "default", size: "large", weight: "bolder", color: "default", isSubtle: false } },
    textBlock: { headingLevel: 2 },
    containerStyles: styles,
    actions: {
      maxActions: 6,
      spacing: "Default",
      buttonSpacing: 8,
      showCard: { actionMode: "Inline", inlineTopMargin: 16, style: "emphasis" },
      preExpandSingleShowCardAction: false,
      actionsOrientation: "Horizontal",
      actionAlignment: "Left",
    },
    adaptiveCard: { allowCustomStyle: false },
    imageSet: { imageSize: "Medium", maxImageHeight: 100 },
    factSet: {
      title: { size: "Default", color: "Default", isSubtle: false, weight: "Bolder", wrap: true },
      value: { size: "Default", color: "Default", isSubtle: false, weight: "Default", wrap: true },
      spacing: 16,
    },
  };
}

// Light: dark text on white; the colored container styles are the same in
// both themes.
const lightText = palette(
  ["#ff252424", "#bf252424"],
  ["#252424", "#bf252424"],
  ["#6264a7", "#8b8cc7"],
  ["#92c353", "#e592c353"],
  ["#f8d22a", "#e5f8d22a"],
  ["#c4314b", "#e5c4314b"],
  ["#ffffff", "#fff3f2f1"],
);

const darkAccents = [
  ["#ffa6a7dc", "#ff8b8cc7"],
  ["#ff92c353", "#e592c353"],
  ["#fff8d22a", "#e5f8d22a"],
  ["#ffd74654", "#e5d74654"],
  ["#ffffffff", "#bfffffff"],
];
const darkText = palette(["#ffffffff", "#bfffffff"], ["#ff201f1f", "#ff2d2c2c"], ...darkAccents);
const darkOnColor = palette(["#ff201f1f", "#ff2d2c2c"], ["#ff201f1f", "#ff2d2c2c"], ...darkAccents);

const colored = (text) => ({
  accent: { backgroundColor: "#C7DEF9", borderColor: "#62A8F7", foregroundColors: text },
  good: { backgroundColor: "#CCFFCC", borderColor: "#69E569", foregroundColors: text },
  attention: { backgroundColor: "#FFC5B2", borderColor: "#FF764C", foregroundColors: text },
  warning: { backgroundColor: "#FFE2B2", borderColor: "#FFBC51", foregroundColors: text },
});

export const teamsLight = config(Object.assign({
  default: { backgroundColor: "#ffffff", borderColor: "#CCCCCC", foregroundColors: lightText },
  emphasis: { backgroundColor: "#fff9f8f7", borderColor: "#666666", foregroundColors: lightText },
}, colored(lightText)));

export const teamsDark = config(Object.assign({
  default: { backgroundColor: "#ff2d2c2c", borderColor: "#CCCCCC", foregroundColors: darkText },
  emphasis: { backgroundColor: "#ff292828", borderColor: "#666666", foregroundColors: darkText },
}, colored(darkOnColor)));
