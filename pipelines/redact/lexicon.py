"""Small word lists the name and NER heuristics use (written for this project).

``COMMON_WORDS``: frequent English and agent-jargon words. A capitalised word from
this list at the start of a sentence says nothing about names, so it does not make
a text worth NER. ``FIRST_NAMES``: common given names from many languages, minus
those that are also everyday words or places (``Will``, ``May``, ``Paris``), used to
catch names the small spaCy model labels ORG or misses. ``DEMONYMS``: nationality
adjectives, for "the <nationality> government" (a country, so a place).
"""

from __future__ import annotations

COMMON_WORDS = frozenset(
    """
    a able about above absolutely accept access according account across action
    actions active actually add added adding additional additionally address after
    afterwards again against agent ago agree ahead all allow allowed almost alone
    along already alright also alternatively although always am among an analysis
    analyze and another answer any anyway anything api app apparently append apply
    approach appropriate are area around as ask asked assistant assume at attempt
    available avoid away back background bad based basic be because become been
    before begin behavior being below best better between both break brief bring
    bug build but by call called can cannot case cases cause certainly change
    changed changes check checked checking choose class clean clear click close
    code command comment commit common complete completed config configuration
    confirm consider contains content context continue correct could create
    created current currently data date day days debug default define delete
    description details did different do does doing done down due during each
    earlier easy edit either else empty end ensure enter entire error errors even
    event every everything exactly example except exception existing expected
    explain failed false feel few field file files final finally find finish
    first fix fixed flight following for format found free from full function
    further general generate get give given go going good got great had handle
    happy has have having he hello help her here hey hi high his hmm how however
    i if ill im implement important in include including indeed info information
    input inside instead is issue issues it item items its itself just keep key
    know last later latest least left less let lets like likely line lines list
    load local long look looking looks lot low main make many may maybe me mean
    meanwhile message method might missing mode model modify more moreover most
    move much must my name need needed needs new next nice no none nor not note
    nothing now null number object observation of off ok okay old on once one
    only open option options or order other otherwise our out output over own
    page parameter parameters part pass passed path per perfect perhaps please
    point policy possible potential previous print probably problem proceed
    process provide provided python query question quite rather read ready real
    really reason recent remember remove replace request required requires
    reservation response result results return right run running same save say
    search second section see seems select send set setting should show simple
    simply since so solution some something sorry source specific start status
    step steps still stop string success successfully such suggest summary sure
    system take task test tests text than thank thanks that the their them then
    there therefore these they thing things think this those though thought three
    through thus time to today together tool total trip true try trying two type
    under understand unfortunately until up update updated use used user using
    valid value values version very via view wait want was way we well were what
    whatever when where whether which while who why will with within without
    wonderful work working would wow yes yet you your yours youre youve
    january february march april june july august september october november
    december monday tuesday wednesday thursday friday saturday sunday
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
    am pm est pst utc gmt
    """.split()
)

FIRST_NAMES = frozenset(
    """
    aaliyah aaron abdul abigail abraham ada adam adrian adriana agnes ahmed aisha
    alan albert alberto alejandro aleksandr alex alexander alexandra alexis alfred
    ali alice alicia alina alison allison alvaro amanda amber amelia amir amy ana
    anastasia andre andrea andreas andrei andrew andy angela angelica anita ann
    anna anne annika anthony anton antonio arjun arne arthur ashley astrid aurora
    ava ayesha barbara beatriz ben benjamin bernard beth betty bianca boris brad
    bradley brandon brenda brian brittany bruce bruno bryan caleb camila camille
    carl carla carlos carmen carol caroline carolyn catherine cecilia charles
    charlotte chen chloe chris christian christina christine christopher claire
    clara claudia colleen connor craig cristina cynthia daniel daniela danielle
    david deborah debra denis dennis derek diana diego dimitri dmitri dominic
    donald donna doris dorothy douglas duncan dustin edward elena eli elias elijah
    elisa elizabeth ella ellen emily emma emmanuel eric erik erin ethan eugene
    eva evelyn fatima felix fernando filip fiona francesca francisco frank
    franz freya gabriel gabriela gabrielle gary george gerald giovanni giulia
    gloria gonzalo gordon greg gregory gustav hannah hans harold harry heather
    heidi helen helena henrik henry hiroshi hugo ian igor ingrid irene isaac
    isabel isabella ivan jack jacob jacqueline jakob james jamie jana jane
    janet janice jared jasmine jason javier jean jeffrey jennifer jeremy jessica
    jesus joan joanna joao joel johan johannes john jonathan jorge jose joseph
    joshua joyce juan judith julia julian julie justin karen karin karl kate
    katherine kathleen kathryn katie kay keith kelly kenneth kevin kim kimberly
    klaus kristin kyle larry lars laura lauren leah lena leo leon leonardo lina
    linda lisa liam lily logan lorenzo louis louise lucas lucia luis luisa luke
    magnus maria mariana marie marina mario marisa marta martha martin mary
    mateo matteo matthew maximilian megan mehmet melissa mia michael michelle
    miguel mikhail mila milan minh mohamed mohammed monica mustafa nadia nancy
    naomi natalia natalie nathan nicholas nicole nikita nikolai nils noah nora
    oleg olga oliver olivia omar oscar pablo pamela patricia patrick paul paula
    pedro peter petra philip phillip pierre priya rachel rafael rahul ramon raul
    rebecca richard rita robert roberto robin roger roland ronald rosa ruth ryan
    sabrina samantha samuel sandra sara sarah scott sean sebastian sergei sergio
    shannon sharon shirley simon sofia sophia sophie stefan stephanie stephen
    steven susan svetlana sven tatiana teresa thomas tiffany timothy tobias todd
    tom tomas tyler valentina valeria vanessa vera veronica victor victoria
    vincent vladimir walter wei wendy william xavier yan yasmin yuki
    yusuf zachary zoe
    abby adeline aileen alana alyssa amara amira anya ariana arielle
    athena audrey beatrice bella bethany brianna bridget caitlin callie camilla
    cassandra cassidy celeste celine charlene cheryl cindy claudette colette cora
    courtney daphne darlene delia delilah denise diane edith eileen
    elaine eleanor eliza ellie eloise elsa emilia erica esme esther estelle
    eunice evangeline faye felicity frances genevieve gianna gina giselle gwen
    gwendolyn hailey harriet helga hilda imogen irina isla ivana jacquelyn janine
    jeanette jenna jill jillian joanne jocelyn josephine judy juliana juliet
    kaitlyn kara karina katarina katrina kayla kendra kirsten kristen kylie layla
    leila leslie lila liliana lillian lilly lindsay lindsey lorena lorraine lucy
    lydia lynn mabel madeline maeve maggie makayla mallory marcia margaret margo
    marguerite marianne marilyn marjorie marlene maureen maxine melanie melinda
    meredith mildred miranda miriam molly myra nadine natasha nell nina noelle
    norma octavia odette ophelia paige patrice paulina pauline penelope phoebe
    phyllis polly priscilla rachael ramona renee rhonda roberta rosalind roxanne
    sabine samara sasha selena serena sheila sienna silvia simone sonia stella
    susanna suzanne sylvia tamara tanya tara tessa thea theresa tina tracy trisha
    ursula valerie vivian wanda whitney wilma yolanda yvette yvonne zelda
    aidan alec alfonso alistair alonzo ambrose anders angus archie arnold ashton
    barry benedict bernardo bjorn brendan brett byron calvin cedric cesar
    chester clarence clayton clifford clint clyde colin cornelius curtis cyril
    dalton damian damon dante darius darren dave davide declan desmond dominik
    donovan dorian doug dwayne dylan edgar edmund eduardo edwin elliot elliott
    emil emilio enrico enzo ernest ernesto esteban evan everett ezra fabian
    federico felipe floyd francis fred freddie frederick gareth gavin gerard
    gilbert giorgio graham gunnar hamish harvey hector herbert horace howard
    humberto ignacio isaiah ismael jacques jake jamal jeff jerome jesse jim jimmy
    joe joey jonas josh julio jurgen keanu kendrick kurt leonard leroy lionel
    lloyd lonnie lucian luca lucius luther malcolm manuel marco marcus marius
    marvin mathias maurice melvin milo mitchell nathaniel neil nelson nigel
    quentin ralph randall randy raymond reggie reginald rhys ricardo ricky rodney
    rodrigo ronan rudy rufus russell salvatore seth shane sidney silas spencer
    stanley stuart terrence theo theodore toby tommy travis trevor ulrich vernon
    vince wallace warren wayne wesley wilbur wilfred winston wyatt
    """.split()
)

#: Words that end an organisation name; an ORG span ending in one stays ORG.
ORG_SUFFIXES = frozenset(
    """
    inc inc. ltd ltd. llc corp corp. corporation company co co. group holdings
    gmbh ag sa plc bank university college institute school hospital software
    systems solutions technologies consulting partners associates foundation
    agency airlines airways labs studio studios club
    """.split()
)

#: Nationality adjectives. "the sudanese government" names a country, which the
#: place rules take as a LOCATION (a nationality alone is NRP, not redacted).
DEMONYMS = frozenset(
    """
    afghan albanian algerian american andorran angolan argentine argentinian
    armenian australian austrian azerbaijani bahraini bangladeshi belarusian
    belgian bolivian bosnian brazilian british bulgarian burmese burundian
    cambodian cameroonian canadian chadian chilean chinese colombian congolese
    croatian cuban cypriot czech danish djiboutian dominican dutch ecuadorian
    egyptian emirati english eritrean estonian ethiopian fijian filipino finnish
    french gabonese gambian georgian german ghanaian greek guatemalan guinean
    guyanese haitian honduran hungarian icelandic indian indonesian iranian iraqi
    irish israeli italian ivorian jamaican japanese jordanian kazakh kenyan korean
    kosovar kuwaiti kyrgyz laotian latvian lebanese liberian libyan lithuanian
    macedonian malagasy malawian malaysian maldivian malian maltese mauritanian
    mauritian mexican moldovan monegasque mongolian montenegrin moroccan
    mozambican namibian nepalese nepali nicaraguan nigerian nigerien norwegian
    omani pakistani palestinian panamanian paraguayan peruvian polish portuguese
    qatari romanian russian rwandan salvadoran samoan saudi scottish senegalese
    serbian singaporean slovak slovakian slovenian somali spanish
    sudanese surinamese swedish swiss syrian taiwanese tajik tanzanian thai
    togolese tongan tunisian turkish turkmen ugandan ukrainian uruguayan uzbek
    venezuelan vietnamese welsh yemeni zambian zimbabwean
    """.split()
)


_ZIPF_CACHE: dict[str, float] = {}
_ZIPF_CACHE_MAX = 200_000


def zipf_en(word: str) -> float:
    """English word frequency on the Zipf scale (``wordfreq``; 0.0 if unknown).

    ``wordfreq`` ships its frequency tables in the wheel (no download) and loads
    the English one in ~0.15 s on first use; results are memoised per word because
    the name and secret heuristics ask about the same few thousand tokens again
    and again. Without ``wordfreq`` installed, ``COMMON_WORDS`` stands in (a word
    on it counts as 5.0).
    """
    low = word.lower()
    cached = _ZIPF_CACHE.get(low)
    if cached is not None:
        return cached
    try:
        from wordfreq import zipf_frequency  # noqa: PLC0415
    except ImportError:  # pragma: no cover - wordfreq is a pinned dependency
        value = 5.0 if low in COMMON_WORDS else 0.0
    else:
        value = zipf_frequency(low, "en")
    if len(_ZIPF_CACHE) < _ZIPF_CACHE_MAX:
        _ZIPF_CACHE[low] = value
    return value


def common_english(word: str, floor: float = 3.0) -> bool:
    """Whether ``word`` is an everyday English word (Zipf >= ``floor``).

    3.0 is roughly "once per million words": ``required``, ``sunshine``,
    ``rose`` and ``page`` are above it, ``adminpass`` and ``kowalski`` below.
    """
    return word.lower() in COMMON_WORDS or zipf_en(word) >= floor
