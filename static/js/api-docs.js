// Starts Swagger UI on /api/docs (templates/api/docs.html) with the page's JSON configuration: the
// Content-Security-Policy forbids inline script. Every call it makes carries the page's CSRF token.
(function () {
  "use strict";
  var config = JSON.parse(document.getElementById("swagger-config").textContent);
  var csrfToken = document.getElementById("swagger-ui").dataset.csrfToken;
  config.presets = [SwaggerUIBundle.presets.apis];
  config.requestInterceptor = function (request) {
    request.headers["X-CSRFToken"] = csrfToken;
    return request;
  };
  window.ui = SwaggerUIBundle(config);
})();
