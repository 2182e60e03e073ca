//! An error and its causes as one line of text, for messages built from
//! a client's error (a leaf module: `error` and `tls` both stand on it).

/// An error and its causes on one line, a cause left out where the text
/// already holds it (clients that repeat their source in their own
/// message would otherwise print it twice).
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
