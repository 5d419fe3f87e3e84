//! Repository automation for the skills-agent workspace, as a library so the tidy checks run
//! under `cargo test --workspace` as well as from `cargo xtask tidy`.

pub mod bench;
pub mod features;
pub mod fleet_bench;
pub mod local_llm;
pub mod model_bench;
pub mod outside;
pub mod package;
pub mod tidy;

/// An error and its causes for the console, `: `-joined like `{:#}`, leaving out a cause whose
/// text the message already holds (the bench's errors print their IO cause themselves, which
/// `{:#}` printed a second time: `…/examples/skills: No such file or directory (os error 2):
/// No such file or directory (os error 2)`).
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn a_cause_the_message_already_holds_is_not_repeated() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        /// Prints its source itself, as the bench's `Error::Io` does.
        #[derive(Debug)]
        struct Holds(std::io::Error);
        impl std::fmt::Display for Holds {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(formatter, "skills/: {}", self.0)
            }
        }
        impl std::error::Error for Holds {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let holds = anyhow::Error::new(Holds(io()));
        assert_eq!(format!("{holds:#}"), "skills/: no such file: no such file");
        assert_eq!(describe(&holds), "skills/: no such file");
        // Causes the message does not hold are kept, outermost first.
        let wrapped = anyhow::Error::new(io()).context("reading skills/").context("bench");
        assert_eq!(describe(&wrapped), "bench: reading skills/: no such file");
    }
}
