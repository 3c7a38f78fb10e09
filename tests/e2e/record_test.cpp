// placeholder-free: real tests are added below once the build links.
