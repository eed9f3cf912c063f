// The old grep dropped any line with a comment mentioning throw after the code.
void F(bool x) {
  if (x) throw 1;  // never throw here
}
