//! Link settings Node addons need on each platform (e.g. `-undefined dynamic_lookup` on macOS).

fn main() {
    napi_build::setup();
}
