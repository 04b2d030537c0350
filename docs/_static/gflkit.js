// A figure opens at the window's size on click, and closes on the next click anywhere.
document.addEventListener("click", (event) => {
  const open = document.querySelector("img.gflkit-zoomed");
  if (open) {
    open.classList.remove("gflkit-zoomed");
    return;
  }
  const image = event.target.closest("figure.gflkit-figure img");
  if (image) image.classList.add("gflkit-zoomed");
});
