#!/usr/bin/env bash
# Tree hygiene: fails (exit 1), naming FILE:LINE, on a file that narrates the project's own
# history by markers of a work session or round (an ordinal or a number with "session", "this"
# or "last" with "session", "in round" with a number, "since the" with an ordinal and "pass"),
# and on a tracked Python cache (__pycache__/, *.pyc). Comments, tables and docs say today's
# reason; which round of work did what belongs in git. tests/tree/check_tree_test.sh plants
# examples of each marker.
#   scripts/check-tree.sh             every tracked file (git ls-files)
#   scripts/check-tree.sh FILE...     only these files (tests plant files this way)
# Exit status: 0 clean, 1 a finding (each on a FILE:LINE: line), 77 not a git checkout.
# Ordinary prose is not narration: "the second pass over the keys", "two rounds of loads",
# "an HTTP session" do not match; only the work-session sense does. A marker split over two
# lines of a comment (the ordinal ending one line, "session" opening the next) is found too.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

if (($#)); then
  files=("$@")
else
  # 77: ctest's skip code, for a source tree that is not a git checkout (nothing is "tracked").
  git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "check-tree: not a git checkout"; exit 77; }
  mapfile -t files < <(git ls-files)
fi

status=0
text=()
for f in "${files[@]}"; do
  case "/$f/" in
    */__pycache__/* | *.pyc/)
      echo "$f:1: tracked Python cache (git rm it; .gitignore has __pycache__/)"; status=1; continue ;;
  esac
  [[ -f "$f" ]] && text+=("$f")
done

((${#text[@]})) && perl -e '
  my $ord = qr/first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|[0-9]+(?:st|nd|rd|th)/i;
  my $re = qr/
      \b(?:$ord)[-\s]+sessions?\b                             # an ordinal, then session
    | \bsessions?\s+[0-9]+\b                                  # session, then a number
    | \b(?:this|last|next|previous|earlier|that)\s+session\b  # this, last ... then session
    | \b(?:until|since|before|after|in)\s+the\s+(?:$ord)\s+(?:round|pass)\b  # since the <ordinal> pass
    | \b(?:in|since|until|after|before|from)\s+round\s+[0-9]+\b  # in round <number>
  /xi;
  my $bad = 0;
  for my $f (@ARGV) {
    next if -B $f;                         # binary files
    open(my $fh, "<", $f) or next;
    my ($prev, $prev_bad, $n) = ("", 0, 0);
    while (my $line = <$fh>) {
      $n++;
      chomp $line;
      my $this_bad = 0;
      if ($line =~ $re) { print "$f:$n: $line\n"; $bad = $this_bad = 1; }
      elsif (!$prev_bad) {
        (my $cur = $line) =~ s{^\s*(?://+|#+|\*+|--|;+|<!--)?\s*}{};
        my $tail = $prev =~ /(\S+\s*\S*)\s*$/ ? $1 : "";
        if ($tail ne "" && "$tail $cur" =~ $re) { print "$f:", $n - 1, ": $prev\n"; $bad = 1; }
      }
      ($prev, $prev_bad) = ($line, $this_bad);
    }
  }
  exit $bad;
' "${text[@]}" || { status=1; echo "check-tree: the lines above narrate the project's history; say today's reason instead" >&2; }
exit "$status"
