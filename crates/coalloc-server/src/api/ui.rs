//! The web dashboard at `/ui`: three static files (`crates/coalloc-server/ui/`) built into
//! the binary, so it needs no network and no build step. The page holds no data: it reads
//! the API with the server's token (given as `/ui#token=...` or typed in), and stays live
//! from the event stream.

use super::AppState;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../../ui/index.html");
const SCRIPT: &str = include_str!("../../ui/app.js");
const STYLE: &str = include_str!("../../ui/style.css");

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(index))
        .route("/ui/app.js", get(script))
        .route("/ui/style.css", get(style))
}

/// The dashboard's page (no token needed: it holds no data).
#[utoipa::path(get, path = "/ui", tag = "dashboard",
    responses((status = 200, description = "the dashboard", body = String, content_type = "text/html",
        example = json!("<!doctype html><html lang=\"en\">…</html>"))))]
pub async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX)
}

/// The dashboard's script.
#[utoipa::path(get, path = "/ui/app.js", tag = "dashboard",
    responses((status = 200, description = "the script", body = String, content_type = "text/javascript",
        example = json!("\"use strict\";"))))]
pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

/// The dashboard's style sheet.
#[utoipa::path(get, path = "/ui/style.css", tag = "dashboard",
    responses((status = 200, description = "the style sheet", body = String, content_type = "text/css",
        example = json!("body { margin: 0; }"))))]
pub async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}
