//! Generates the LR parser from `src/grammar.lalrpop` into `$OUT_DIR/grammar.rs`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Build canonical LR(1) tables instead of lalrpop's default lane-table ones, which merge
    // states and so detect some errors only after reducing: `from t | where a )` would then
    // report "expected `from`, `let`, `table`" instead of also naming `|` and the operators.
    // The tables are larger, but every error is caught at the first wrong token. Edition 2021:
    // `set_var` is safe here, and the build script is single-threaded.
    std::env::set_var("LALRPOP_LANE_TABLE", "disabled");
    lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        // Regenerate whenever the script runs (only when the grammar changes, given the rerun
        // directives), so a change of table construction above is never masked by a stale file.
        .force_build(true)
        .process()
}
