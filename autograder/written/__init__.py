"""Written answers: the handouts' question format and its automatic grading (`answers`), and grading
the prose by hand with sheets an instructor fills in (`manual`, its page template `sheet.html.j2`), and the
answer keys read from the handouts and the hidden suites (`answer_key`)."""
