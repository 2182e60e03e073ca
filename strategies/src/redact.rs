//! The one place passwords are taken out of what the tool shows: URLs in
//! errors, logs, `Debug` output, `run.json` and the reports. A results
//! folder never holds a password, not even RabbitMQ's published default
//! (`guest`), whose redacted form the harness reads back as the default.
//!
//! It works on text, not on a parsed URL, so it also hides the password of
//! a URL that does not parse (`amqp://guest:p@ss@host`), of one inside an
//! argument (`--db=postgres://u:pw@h/db`) and of each URL of a list
//! (a RabbitMQ cluster's `amqp://…,amqp://…`), and it changes nothing else.

/// Whether `url` (or one URL of a comma list) had its password replaced
/// by [`url`]: such a URL cannot log in, and must be given again.
pub fn was_redacted(url: &str) -> bool {
    url.contains(":***@")
}

/// `url` with its password replaced by `***` (each one, for a comma list
/// of URLs); anything without a password is returned as it was.
///
/// The password is taken to be everything between the first `:` after
/// `://` and the last `@`, so a password holding `@` or `/` is hidden whole;
/// where that errs, it hides more, never less.
pub fn url(url: &str) -> String {
    // A list of URLs (a RabbitMQ cluster's nodes): each one.
    if let Some((first, rest)) = url.split_once(',') {
        if first.contains("://") && rest.contains("://") {
            return format!("{},{}", self::url(first), self::url(rest));
        }
    }
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    match (rest.find(':'), rest.rfind('@')) {
        (Some(colon), Some(at)) if colon < at => {
            format!("{}***{}", &url[..authority_start + colon + 1], &rest[at..])
        }
        _ => url.to_string(),
    }
}

/// Free text (a command's output, a log, a command line) with the password
/// of every URL in it replaced by `***`: [`url`] on each
/// whitespace-separated word; the whitespace is kept as it was.
pub fn text(text: &str) -> String {
    text.split_inclusive(char::is_whitespace)
        .map(|piece| {
            let word = piece.trim_end_matches(char::is_whitespace);
            if word.contains("://") {
                format!("{}{}", url(word), &piece[word.len()..])
            } else {
                piece.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_removed_from_free_text() {
        let given = "cluster up: amqp://guest:guest@127.0.0.1:5681/%2f,amqp://guest:guest@127.0.0.1:5682/%2f\n\
                     AMQP=amqp://u:pw@h/ and redis://:s3@h:7000 done\n";
        let want =
            "cluster up: amqp://guest:***@127.0.0.1:5681/%2f,amqp://guest:***@127.0.0.1:5682/%2f\n\
                     AMQP=amqp://u:***@h/ and redis://:***@h:7000 done\n";
        assert_eq!(text(given), want);
        assert_eq!(text("no urls here\n"), "no urls here\n");
    }

    #[test]
    fn passwords_are_removed_from_any_url_form() {
        for (raw, want) in [
            ("postgres://u:secret@h/db", "postgres://u:***@h/db"),
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            ("mysql://root@h/test", "mysql://root@h/test"),
            (
                "--db=mysql://root:pw@127.0.0.1:3306/test",
                "--db=mysql://root:***@127.0.0.1:3306/test",
            ),
            (
                "amqp://guest:p@ss@host:5672/%2f",
                "amqp://guest:***@host:5672/%2f",
            ),
            (
                "redis://:secret@127.0.0.1:6379",
                "redis://:***@127.0.0.1:6379",
            ),
            (
                "postgres://root@127.0.0.1/test",
                "postgres://root@127.0.0.1/test",
            ),
            ("postgres://u:p/w@h/db", "postgres://u:***@h/db"),
            ("postgres://root@h:5432/db", "postgres://root@h:5432/db"),
            ("sqlite://", "sqlite://"),
            ("--strategies", "--strategies"),
            ("a,b", "a,b"),
            (
                "--amqp=amqp://g:pw@h:5681,amqp://g:pw@h:5682/%2f",
                "--amqp=amqp://g:***@h:5681,amqp://g:***@h:5682/%2f",
            ),
            (
                "amqp://g:secret@h1:5672/%2f,amqp://g:secret@h2:5672/%2f,amqp://g:secret@h3",
                "amqp://g:***@h1:5672/%2f,amqp://g:***@h2:5672/%2f,amqp://g:***@h3",
            ),
        ] {
            assert_eq!(url(raw), want, "{raw}");
        }
    }

    #[test]
    fn a_redacted_url_is_told_from_one_that_can_log_in() {
        let given = "amqp://u:secret@h1/%2f,amqp://u:secret@h2/%2f";
        assert!(!was_redacted(given));
        assert!(was_redacted(&url(given)));
        assert!(!was_redacted("redis://127.0.0.1:6379"));
        assert!(was_redacted(&url("redis://:pw@127.0.0.1:6379")));
    }
}
