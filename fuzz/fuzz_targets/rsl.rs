//! Fuzz the RSL parser, printer, substitution and mapping: any text gives a value or an
//! error, never a panic; what parses prints to text that parses to the same tree.
#![no_main]
use coalloc_core::rsl;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(req) = rsl::parse(text) {
        let printed = rsl::print(&req);
        let again = rsl::parse(&printed).expect("printed RSL parses");
        assert_eq!(again.erase_positions(), req.erase_positions());
        let _ = rsl::expand(&req);
    }
    if let Ok(job) = rsl::job_from_rsl(text, None) {
        if let Ok(back) = rsl::job_to_rsl(&job) {
            assert_eq!(rsl::job_from_rsl(&back, None).expect("printed job parses"), job);
        }
    }
});
