fn main() { todo!() }
