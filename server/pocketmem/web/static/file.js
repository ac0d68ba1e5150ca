// The import form's file button: a styled label over the native input (whose own words follow the browser's
// language, not the page's), and the chosen file's name beside it.
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || input.type !== "file") return;
  const shown = document.getElementById("file-name");
  if (shown) shown.textContent = input.files && input.files.length ? input.files[0].name : shown.dataset.none;
});
