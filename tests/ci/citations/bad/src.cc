// Planted: each citation below is one the checker must refuse (7 in all).
// A section sign names no file: §1.1.
// No such heading: docs/facts.md "1.2 Missing heading".
// A bare number after the file: docs/facts.md 1.1.
// No such file: docs/missing.md "1.1 Some heading".
// A chained heading that does not exist: docs/facts.md "1.1 Some heading", "9.9 Nope".
// Cut inside a word: docs/facts.md "1.1 Some head".
