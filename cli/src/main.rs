//! `burn-route-codegen`: check, render and diff an ops.toml manifest, print its kernel stubs
//! (`skeleton`) or the JSON Schema of the format (`schema`), or print a section of the error
//! reference offline (`explain`).
//!
//! Exit status: 0 success; 1 the manifest has errors (`check`, `render`, `diff`, `skeleton`) or
//! the generated files are stale (`diff`); 2 the command could not run (unreadable file, bad
//! option, a section `explain` does not know). Warnings
//! (`check`, `render`: a declared type no op uses) go to stderr, rendered like rustc, and leave
//! the exit status 0.

use std::path::PathBuf;
use std::process::ExitCode;

use burn_route_codegen::{Builder, Error, File, Report};
use clap::{Args, Parser, Subcommand};
use similar::TextDiff;

#[derive(Parser)]
#[command(
    name = "burn-route-codegen",
    version,
    about = "Generate Burn Dispatch routing from an ops.toml manifest"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate a manifest and print every problem.
    Check {
        /// The manifest.
        manifest: PathBuf,
        /// Also check what the op check needs, as a build script with `Builder::op_check` does.
        #[arg(long)]
        op_check: bool,
    },
    /// Write the generated modules.
    Render {
        /// The manifest.
        manifest: PathBuf,
        /// Output directory.
        #[arg(long, default_value = "generated")]
        out: PathBuf,
        #[command(flatten)]
        paths: Paths,
    },
    /// Show what `render` would change in a directory; exit 1 when it is stale.
    Diff {
        /// The manifest.
        manifest: PathBuf,
        /// The directory with the generated files.
        generated: PathBuf,
        #[command(flatten)]
        paths: Paths,
    },
    /// Print kernel stubs: every `impl` the crate writes by hand, with `todo!()` bodies.
    Skeleton {
        /// The manifest.
        manifest: PathBuf,
        #[command(flatten)]
        paths: Paths,
    },
    /// Print the JSON Schema of the manifest format.
    Schema,
    /// Print a section of the error reference offline (the page every message links), or list
    /// the sections.
    Explain {
        /// The section's anchor, as a message's link ends: `tracked-input`,
        /// `manifest-unknown-key`, ... Without it, every anchor and its heading.
        anchor: Option<String>,
    },
}

/// The paths generated code uses (see `Builder`).
#[derive(Args)]
struct Paths {
    /// Path of the runtime module in generated code.
    #[arg(long, default_value = "::burn_route::rt")]
    runtime_path: String,
    /// Path of the module with the traits, seen from the dispatch module.
    #[arg(long, default_value = "super::ops")]
    trait_module: String,
    /// Path of the dispatch module, seen from the tensor module.
    #[arg(long, default_value = "super::dispatch")]
    dispatch_module: String,
}

impl Paths {
    fn apply(&self, builder: Builder) -> Builder {
        builder
            .runtime_path(&self.runtime_path)
            .trait_module(&self.trait_module)
            .dispatch_module(&self.dispatch_module)
    }
}

fn builder(manifest: &PathBuf) -> Builder {
    let name = manifest.file_name().map_or_else(
        || manifest.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Builder::new(manifest).manifest_name(name)
}

/// `builder` writing the op check too when `op_check` is set (for a crate named `checked`: the
/// path only appears in the check's text, which `check` does not print).
fn op_checked(builder: Builder, op_check: bool) -> Builder {
    if op_check {
        builder.op_check_crate("::checked")
    } else {
        builder
    }
}

/// Prints a failed render: the report for manifest errors (exit 1), the error otherwise (exit 2).
fn failure(err: &Error) -> ExitCode {
    match err {
        Error::Manifest(report) => {
            eprintln!("{}", report.render());
            ExitCode::from(1)
        }
        other => {
            eprintln!("error: {other}");
            ExitCode::from(2)
        }
    }
}

/// Prints the manifest's warnings like rustc, on stderr; they do not change the exit status.
fn warn(warnings: Option<&Report>) {
    if let Some(report) = warnings {
        eprintln!("{}", report.render());
    }
}

/// `explain`: the section, or the list of sections.
fn explain(anchor: Option<&str>) -> ExitCode {
    use burn_route_core::errors;
    use std::fmt::Write as _;
    let mut out = String::new();
    match anchor {
        None => {
            for anchor in errors::anchors() {
                let heading = errors::section(anchor)
                    .and_then(|text| text.lines().next())
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{anchor:<36} {}",
                    heading.trim_start_matches('#').trim()
                );
            }
        }
        Some(anchor) => {
            // A whole link works too.
            let anchor = anchor.rsplit('#').next().unwrap_or(anchor);
            let Some(text) = errors::section(anchor) else {
                eprintln!(
                    "error: the error reference has no section `{anchor}`; \
                     `burn-route-codegen explain` lists them"
                );
                return ExitCode::from(2);
            };
            let _ = writeln!(out, "{text}\n\n(online: {}#{anchor})", errors::PAGE);
        }
    }
    // A reader that stops early (`| head`) is no error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Explain { anchor } => explain(anchor.as_deref()),
        Command::Check { manifest, op_check } => {
            match op_checked(builder(&manifest), op_check).render_with_warnings() {
                Ok((files, warnings)) => {
                    warn(warnings.as_ref());
                    println!(
                        "{}: ok ({} files would be generated)",
                        manifest.display(),
                        files.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(err) => failure(&err),
            }
        }
        Command::Render {
            manifest,
            out,
            paths,
        } => match paths
            .apply(builder(&manifest))
            .out_dir(&out)
            .write_with_warnings()
        {
            Ok((written, warnings)) => {
                warn(warnings.as_ref());
                for (path, outcome) in written {
                    println!("{:?}: {}", outcome, path.display());
                }
                ExitCode::SUCCESS
            }
            Err(err) => failure(&err),
        },
        Command::Diff {
            manifest,
            generated,
            paths,
        } => match paths.apply(builder(&manifest)).render() {
            Ok(files) => diff(&files, &generated),
            Err(err) => failure(&err),
        },
        Command::Skeleton { manifest, paths } => match paths.apply(builder(&manifest)).skeleton() {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(err) => failure(&err),
        },
        Command::Schema => {
            print!("{}", burn_route_codegen::schema::json_schema_text());
            ExitCode::SUCCESS
        }
    }
}

fn diff(files: &[File], dir: &std::path::Path) -> ExitCode {
    let mut stale = 0;
    for file in files {
        let path = dir.join(file.name);
        let old = std::fs::read_to_string(&path).unwrap_or_default();
        if old == file.contents {
            continue;
        }
        stale += 1;
        let shown = path.display().to_string();
        print!(
            "{}",
            TextDiff::from_lines(&old, &file.contents)
                .unified_diff()
                .context_radius(3)
                .header(&format!("{shown} (current)"), &format!("{shown} (render)"))
        );
    }
    if stale == 0 {
        println!("{}: up to date", dir.display());
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "{stale} stale file{} in {}",
            if stale == 1 { "" } else { "s" },
            dir.display()
        );
        ExitCode::from(1)
    }
}
