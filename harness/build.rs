//! Records the commit the binary is built from, so `delaybench reference`
//! can refuse a binary older than the checkout it would vouch for.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // The last commit that changed the code (as run_info::git_commit
    // reads it): a commit of run folders or Markdown alone builds the same
    // binary.
    let code = git(&[
        "log",
        "-1",
        "--format=%H",
        "--",
        ":(top)",
        ":(top,exclude)results",
        ":(top,exclude,glob)**/*.md",
    ])
    .filter(|c| !c.is_empty());
    if let Some(commit) = code.or_else(|| git(&["rev-parse", "HEAD"])) {
        println!("cargo:rustc-env=DELAYBENCH_BUILD_COMMIT={commit}");
    }
    // A new commit rebuilds; so does a branch switch.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/refs/heads");
        println!("cargo:rerun-if-changed={dir}/packed-refs");
    }
}
