"""Chat messages of a realistic size and entropy, the same on every side of a benchmark.

`exchange(n)` is turn n's user message and assistant answer: deterministic pseudo-random
prose, words drawn from a list of common English words in frequency order with Zipf
weights (rank^-1.1, so "the" and "of" recur as in English and rare words stay rare), in
sentences of 4–22 words with the odd comma and number; one word in five is instead a run
of 2–5 words the same message said before, as prose comes back to its own phrases (without
it the text compresses less than English does). A user message is 150–400 bytes
(a question of a sentence or three), an answer 400–1,200 bytes (a paragraph or two);
uniform within each range (a message ends on a whole sentence, so user ~300 B and answer
~840 B on average: ~1,150 B of text a turn). Each turn
has its own generator, seeded from `SEED` and n, so a side can make turn n without
making the turns before it.

Why not the same short string each turn: Postgres compresses (pglz) any value over ~2 KB,
and a list of near-identical short strings compresses ~30×, so a store that rewrites the
whole list each step looks cheap on disk. Real prose compresses ~1.7–2.3× with pglz
(this project's docs: 1.8× in 4 KB pieces, 2.2× in 16 KB); this text does likewise
(`bench/README.md` has the figures).
"""

from __future__ import annotations

import itertools
import random

SEED = 20_261_129
USER_BYTES = (150, 400)
ASSISTANT_BYTES = (400, 1_200)
REUSE = 0.2
EXPONENT = 1.1

# Common English words, roughly most frequent first.
_COMMON = """
    the of and to a in is it you that he was for on are with as i his they be at one have
    this from or had by not word but what some we can out other were all there when up
    use your how said an each she which do their time if will way about many then them
    write would like so these her long make thing see him two has look more day could go
    come did number sound no most people my over know water than call first who may down
    side been now find any new work part take get place made live where after back little
    only round man year came show every good me give our under name very through just form
    sentence great think say help low line differ turn cause much mean before move right
    boy old too same tell does set three want air well also play small end put home read
    hand port large spell add even land here must big high such follow act why ask men
    change went light kind off need house picture try us again animal point mother world
    near build self earth father head stand own page should country found answer school
    grow study still learn plant cover food sun four between state keep eye never last let
    thought city tree cross farm hard start might story saw far sea draw left late run
    while press close night real life few north open seem together next white children
    begin got walk example ease paper group always music those both mark often letter until
    mile river car feet care second book carry took science eat room friend began idea fish
    mountain stop once base hear horse cut sure watch color face wood main enough plain
    girl usual young ready above ever red list though feel talk bird soon body dog family
    direct pose leave song measure door product black short numeral class wind question
    happen complete ship area half rock order fire south problem piece told knew pass since
    top whole king space heard best hour better true during hundred five remember step
    early hold west ground interest reach fast verb sing listen six table travel less
    morning ten simple several vowel toward war lay against pattern slow center love person
    money serve appear road map rain rule govern pull cold notice voice unit power town
    fine certain fly fall lead cry dark machine note wait plan figure star box noun field
    rest correct able pound done beauty drive stood contain front teach week final gave
    green oh quick develop ocean warm free minute strong special mind behind clear tail
    produce fact street inch multiply nothing course stay wheel full force blue object
    decide surface deep moon island foot system busy test record boat common gold possible
    plane stead dry wonder laugh thousand ago ran check game shape equate hot miss brought
    heat snow tire bring yes distant fill east paint language among grand ball yet wave
    drop heart present heavy dance engine position arm wide sail material size vary settle
    speak weight general ice matter circle pair include divide syllable felt perhaps pick
    sudden count square reason length represent art subject region energy hunt probable bed
    brother egg ride cell believe fraction forest sit race window store summer train sleep
    prove lone leg exercise wall catch mount wish sky board joy winter sat written wild
    instrument kept glass grass cow job edge sign visit past soft fun bright gas weather
    month million bear finish happy hope flower clothe strange gone jump baby eight village
    meet root buy raise solve metal whether push seven paragraph third shall held hair
    describe cook floor either result burn hill safe cat century consider type law bit
    coast copy phrase silent tall sand soil roll temperature finger industry value fight
    lie beat excite natural view sense ear else quite broke case middle kill son lake
    moment scale loud spring observe child straight consonant nation dictionary milk speed
    method organ pay age section dress cloud surprise quiet stone tiny climb cool design
    poor lot experiment bottom key iron single stick flat twenty skin smile crease hole
    trade melody trip office receive row mouth exact symbol die least trouble shout except
    wrote seed tone join suggest clean break lady yard rise bad blow oil blood touch grew
    cent mix team wire cost lost brown wear garden equal sent choose fell fit flow fair
    bank collect save control decimal gentle woman captain practice separate difficult
    doctor please protect noon whose locate ring character insect caught period indicate
    radio spoke atom human history effect electric expect crop modern element hit student
    corner party supply bone rail imagine provide agree thus capital chair danger fruit
    rich thick soldier process operate guess necessary sharp wing create neighbor wash bat
    rather crowd corn compare poem string bell depend meat rub tube famous dollar stream
    fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh
    search send yellow gun allow print dead spot desert suit current lift rose continue
    block chart hat sell success company subtract event particular deal swim term opposite
    wife shoe shoulder spread arrange camp invent cotton born determine quart nine truck
    noise level chance gather shop stretch throw shine property column molecule select
    wrong gray repeat require broad prepare salt nose plural anger claim continent oxygen
    sugar death pretty skill women season solution magnet silver thank branch match suffix
    especially fig afraid huge sister steel discuss forward similar guide experience score
    apple bought led pitch coat mass card band rope slip win dream evening condition feed
    tool total basic smell valley nor double seat arrive master track parent shore division
    sheet substance favor connect post spend chord fat glad original share station dad
    bread charge proper bar offer segment slave duck instant market degree populate chick
    dear enemy reply drink occur support speech nature range steam motion path liquid log
    meant quotient teeth shell neck
"""
WORDS = tuple(_COMMON.split())
_WEIGHTS = tuple(itertools.accumulate(1 / rank**EXPONENT for rank in range(1, len(WORDS) + 1)))


def _sentence(rng: random.Random, said: list[str], end: str) -> str:
    """4–22 words; now and then a run of 2–5 words said earlier in the same text, as prose
    comes back to its own phrases."""
    count, words = rng.randint(4, 22), list[str]()
    while len(words) < count:
        roll = rng.random()
        if roll < REUSE and len(said) > 5:
            start = rng.randrange(len(said) - 2)
            words += said[start : start + rng.randint(2, 5)]
        elif roll < REUSE + 0.03:
            words.append(str(rng.choice((rng.randint(2, 99), rng.randint(100, 9_999)))))
        else:
            word = rng.choices(WORDS, cum_weights=_WEIGHTS)[0]
            if not words or word != words[-1]:
                words.append(word)
    said += words
    shown = [
        w + "," if 0 < at < len(words) - 1 and rng.random() < 0.06 else w
        for at, w in enumerate(words)
    ]
    shown[0] = shown[0].capitalize()
    return " ".join(shown).replace(" i ", " I ") + end


def _text(rng: random.Random, low: int, high: int, ends: str) -> str:
    """Sentences until the text is at least a length drawn from [low, high]; cut to high."""
    target, said = rng.randint(low, high), list[str]()
    text = _sentence(rng, said, rng.choice(ends))
    while len(text) < target:
        text += " " + _sentence(rng, said, rng.choice(ends))
    if len(text) > high:
        text = text[:high].rsplit(" ", 1)[0].rstrip(",") + "."
    return text


def exchange(index: int, seed: int = SEED) -> tuple[str, str]:
    """Turn `index`'s user message and assistant answer (ASCII: characters are bytes)."""
    rng = random.Random(f"{seed}/{index}")
    said = _text(rng, *USER_BYTES, ends="?.?")
    answer = _text(rng, *ASSISTANT_BYTES, ends="....!")
    return said, answer


def short(index: int) -> tuple[str, str]:
    """The same short pair every time but for its number: what compresses best."""
    return f"question {index}", f"re: question {index}"
