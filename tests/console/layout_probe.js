// What a user sees of the page (run by the layout test): how far the page is wider than the
// viewport, and the "Log out" button's box, whether it is the element on top at its centre, and
// its text's contrast with the background actually painted behind it (WCAG's formula).
const root = document.documentElement;
const button = [...document.querySelectorAll("header button")]
  .find(b => b.textContent.trim() === "Log out");
if (!button) return {overflow: root.scrollWidth - root.clientWidth, logout: null};
const box = button.getBoundingClientRect();
const top = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
const rgb = s => s.match(/[\d.]+/g).map(Number);
const luminance = ([r, g, b]) => {
  const c = [r, g, b].map(v => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
};
// The first ancestor that paints a background (alpha > 0) is what the text is read against.
let node = button, background = null;
while (node && node.nodeType === 1) {
  const c = rgb(getComputedStyle(node).backgroundColor);
  if (c.length < 4 || c[3] > 0) { background = c; break; }
  node = node.parentElement;
}
background = background || [255, 255, 255];
const a = luminance(rgb(getComputedStyle(button).color)), b = luminance(background);
return {
  overflow: root.scrollWidth - root.clientWidth,
  logout: {left: box.left, right: box.right, top: box.top, bottom: box.bottom,
           width: box.width, height: box.height, on_top: top === button || button.contains(top),
           contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)},
};
