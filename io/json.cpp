// Placeholder translation unit until the io layer lands.
