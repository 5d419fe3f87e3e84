//! Criterion benchmark: sandboxed run overhead against a bare spawn (filled in below).

fn main() {}
