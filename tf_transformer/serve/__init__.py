"""`tf-transformer serve`: any backend `open_translator` opens, behind LibreTranslate's HTTP
API and a page to try it in a browser (Starlette, run by uvicorn).

- `app`: the routes and the error shape;
- `requests`: LibreTranslate's request, read from JSON or a form, and the limits;
- `documents`: a request's texts as sentences and back; `html_text`: `format: html`;
- `batcher`: concurrent requests into batched backend calls, with a bounded queue;
- `static/`: the page (HTML, JavaScript and CSS; no CDN).
"""
