//! The dump splitter and classifier must never panic, and every statement
//! must point at its own bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sqlfleet_dump::{classify, Splitter};

fuzz_target!(|data: &[u8]| {
    for st in Splitter::new(data) {
        let Ok(st) = st else { break };
        let at = &data[st.offset as usize..st.offset as usize + st.text.len()];
        assert_eq!(at, &st.text[..]);
        let _ = classify(&st.text);
    }
});
