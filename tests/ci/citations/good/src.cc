// Citations the checker must accept: a whole heading, docs/facts.md "1.1 Some heading (with a
// note)"; its beginning, docs/facts.md "1.1 Some heading"; a chapter and a chain,
// docs/facts.md "1. First chapter" and "1.1 Some heading" item 2; a quote wrapped over two comment
// lines, docs/facts.md "1.1 Some
// heading". Mentions that are no citations: the file alone (docs/facts.md), a version string
// "2.28.9 build" and docs/ in prose.
const char* kText = "docs/facts.md names a page";  // a string literal without a heading
