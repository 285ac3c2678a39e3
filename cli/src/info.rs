//! `macko info`: what each backend found here.

use macko::{Device, ENV_BACKEND};

pub fn run() -> Result<(), crate::error::CliError> {
    for status in Device::available() {
        match status.device {
            Ok(info) => {
                println!("{:<5} available: {}", status.backend, info.name);
                for (key, value) in &info.properties {
                    println!("        {key:<32} {value}");
                }
            }
            Err(reason) => println!("{:<5} unavailable: {reason}", status.backend),
        }
    }
    match Device::from_env() {
        Ok(dev) => {
            println!("\nselected: {}{}", dev.describe(), chosen_by());
            println!("plan cache: {}", dev.plan_cache());
        }
        Err(e) => println!("\nno device selected: {e}"),
    }
    Ok(())
}

/// Why the selected device is the one printed: " (MACKO_BACKEND=cpu chose it)" where the
/// variable names a backend, nothing where the automatic order chose (a blank variable chooses
/// nothing, as `DeviceOptions::from_env` reads it), so the line never claims an override that
/// did not happen.
fn chosen_by() -> String {
    match std::env::var(ENV_BACKEND) {
        Ok(name) if !name.trim().is_empty() => format!(" ({ENV_BACKEND}={} chose it)", name.trim()),
        _ => String::new(),
    }
}
