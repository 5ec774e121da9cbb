//! The HTTP server: one thread accepting requests, one thread per request.
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use tiny_http::{Request, Response};

use crate::shared::Shared;
use crate::{api, git_http};

/// Accepts requests until the server is unblocked.
pub fn serve(server: Arc<tiny_http::Server>, shared: Arc<Shared>) -> JoinHandle<()> {
    thread::spawn(move || {
        for request in server.incoming_requests() {
            let shared = shared.clone();
            thread::spawn(move || route(&shared, request));
        }
    })
}

fn route(shared: &Shared, request: Request) {
    let url = request.url().to_string();
    let path = url.split('?').next().unwrap_or_default();
    if path == "/api/v1" || path.starts_with("/api/v1/") {
        api::handle(shared, request);
    } else if let Some((owner, name)) = git_http::repo_of(path) {
        git_http::handle(shared, request, owner, name);
    } else {
        let _ = request.respond(Response::from_string("not found\n").with_status_code(404));
    }
}
