//! Fuzz the native TOML job loader and site-list loader: any text gives a job or an error,
//! never a panic; a loaded job writes back to TOML and JSON that load to the same job.
#![no_main]
use coalloc_core::spec::{native, sites};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = sites::parse_sites(text);
    if let Ok(job) = native::from_toml(text) {
        let again = native::from_toml(&native::to_toml(&job)).expect("normalized TOML loads");
        assert_eq!(again, job);
        let again = native::from_json(&native::to_json(&job)).expect("normalized JSON loads");
        assert_eq!(again, job);
    }
});
