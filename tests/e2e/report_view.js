<script>
// Appended to a copy of Snakemake's report by tests/e2e/test_report.py: do what a reader does (open a
// cell's category, press the eye of its group-spread figure) and leave what was seen on <body>.
(function () {
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const withText = (selector, text) =>
    Array.from(document.querySelectorAll(selector)).find((e) => e.textContent.trim() === text);
  async function view() {
    await wait(1500);
    const categories = Array.from(document.querySelectorAll("a span")).map((e) => e.textContent.trim());
    document.body.setAttribute("data-probe-categories", categories.join("|"));
    const category = withText("a", "CELL");
    if (!category) return;
    category.click();
    await wait(1500);
    const entry = withText("td, a, li", "group_std");
    if (!entry) return;
    const row = entry.closest("tr") || entry.parentElement;
    const eye = row.querySelector("a, button");
    (eye || entry).click();
    await wait(2500);
    const images = Array.from(document.querySelectorAll("img")).filter((i) => i.src.startsWith("data:image/png"));
    document.body.setAttribute("data-probe-images", images.map((i) => i.naturalWidth + "x" + i.naturalHeight).join(","));
  }
  window.addEventListener("load", view);
})();
</script>
