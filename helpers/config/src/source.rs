//! The config text and its path, for errors that say `file:line:column: what; fix`.
use std::ops::Range;
use std::path::Path;

use crate::ConfigError;

pub(crate) struct Source<'a> {
    pub(crate) path: &'a Path,
    pub(crate) text: &'a str,
}

impl Source<'_> {
    /// An error at the start of `span` (the top of the file when the span is unknown).
    pub(crate) fn error(
        &self,
        span: Option<Range<usize>>,
        message: impl std::fmt::Display,
    ) -> ConfigError {
        let (line, column) = self.line_column(span.map_or(0, |span| span.start));
        // Keep the promise of a one-line error whatever the message quotes from the file.
        let message = message.to_string().replace(['\r', '\n'], " ");
        ConfigError(format!(
            "{}:{line}:{column}: {message}",
            self.path.display()
        ))
    }

    /// 1-based line and column (in characters) of a byte offset.
    fn line_column(&self, offset: usize) -> (usize, usize) {
        let mut end = offset.min(self.text.len());
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &self.text[..end];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }
}
