//! `macko info`: what each backend found here.

use macko::Device;

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
        Ok(dev) => println!("\nselected: {} (MACKO_BACKEND overrides)", dev.describe()),
        Err(e) => println!("\nno device selected: {e}"),
    }
    Ok(())
}
