fn main() {
    for (name, crd) in tusk::crdgen::all() {
        println!("# {name}");
        println!("{}", tusk::crdgen::to_yaml(&crd).unwrap());
    }
}
