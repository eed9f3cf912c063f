// A comment may say throw; so may a string.
/* throw in a block comment */
const char* kText = "do not throw";
const char* kRaw = R"(throw)";
int NoThrow() { return 0; }  // throw
