// A form with data-confirm asks before it is sent (the tokens page's revoke buttons):
// window.confirm with the attribute's text; "Cancel" sends nothing. Without script the
// form is sent as it is (the server needs no confirmation; the CSP allows no inline handler).
(function () {
  document.addEventListener("submit", function (event) {
    const form = event.target;
    const question = form instanceof HTMLFormElement && form.dataset.confirm;
    if (question && !window.confirm(question)) { event.preventDefault(); }
  });
})();
