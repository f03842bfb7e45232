"""The eight domains of the embedded corpus: the facts of an article and
the templates that tell them.

`corpus` draws an article's domain from `DOMAINS`, its facts from the
domain's ``context`` function (given the draws, `corpus._Rng`, and the
pools of names, `corpus._Pools`) and fills the domain's templates in
narrative order; `WORDS` are the lists a template's ``{key}`` draws from
when the article's facts lack `key`.  Changing a template changes the
files under `d2l_bert/data/embedded` (a test checks them against
``python -m d2l_bert.data.corpus``).
"""

# -------------------------------------------------------------------------
# Formatting numbers as WikiText does

def _number(n):
    """``1234`` -> ``'1 @,@ 234'``, WikiText's split digit groups."""
    return f'{n:,}'.replace(',', ' @,@ ')


def _decimal(n):
    """``12.5`` -> ``'12 @.@ 5'``."""
    return f'{n:.1f}'.replace('.', ' @.@ ')


_ORDINALS = ['first', 'second', 'third', 'fourth', 'fifth', 'sixth',
             'seventh', 'eighth']
_MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July',
           'August', 'September', 'October', 'November', 'December']
_DIRECTIONS = ['north', 'south', 'east', 'west', 'north @-@ east',
               'north @-@ west', 'south @-@ east', 'south @-@ west']
_COLOURS = ['red', 'blue', 'green', 'yellow', 'black', 'white', 'orange',
            'grey']


def _person(rng, pools):
    """First name, surname and the pronouns that agree with them."""
    if rng.chance(0.5):
        return dict(first=rng.choice(pools.male),
                    last=rng.choice(pools.surnames),
                    he='he', He='He', his='his', His='His', him='him')
    return dict(first=rng.choice(pools.female),
                last=rng.choice(pools.surnames),
                he='she', He='She', his='her', His='Her', him='her')


def _prefixed(prefix, person):
    """``{'he': 'she'}`` -> ``{'capt_he': 'she'}``."""
    return {f'{prefix}_{key}': value for key, value in person.items()}


# -------------------------------------------------------------------------
# The eight domains
#
# Each domain has a title, a function drawing the facts of one article (its
# context) and sections.  A section is a heading (None for the lead
# paragraph) and a list of stages in narrative order; each stage is a
# template or a list of alternative templates.  Template syntax:
# `{key}` is the article's fact `key` (or a fresh draw from `WORDS[key]`),
# `[a|b|c]` picks one alternative, and a leading `?` makes the stage
# optional.

WORDS = {
    'direction': _DIRECTIONS,
    'month': _MONTHS,
    'colour': _COLOURS,
}


def _river(rng, pools):
    towns = rng.sample(pools.towns, 4)
    name, river2 = rng.sample(pools.rivers, 2)
    km = rng.randint(40, 420)
    year = rng.randint(1450, 1800)
    year2 = year + rng.randint(20, 150)
    return dict(
        name=name, river2=river2, region=rng.choice(pools.regions),
        town=towns[0], town2=towns[1], town3=towns[2], town4=towns[3],
        km=_number(km), miles=_number(round(km * 0.621)),
        area=_number(km * rng.randint(8, 30)),
        km2=_number(km - rng.randint(5, 30)),
        arches=str(rng.randint(3, 12)), houses=str(rng.randint(12, 90)),
        fish=rng.choice(['trout', 'salmon', 'eels', 'pike', 'carp']),
        bird=rng.choice(['herons', 'kingfishers', 'swans', 'otters']),
        cargo=rng.choice(['coal', 'timber', 'wool', 'grain']),
        year=str(year), year2=str(year2),
        year3=str(year2 + rng.randint(2, 9)),
        year4=str(year2 + rng.randint(20, 80)))


_RIVER = dict(title='{name} River', context=_river, sections=[
    (None, [
        ['The {name} River is a [long|short|slow|fast] river in {region} '
         ', and a tributary of the {river2} .',
         'The {name} is a [long|short|slow|fast] river in {region} , and '
         'one of the main rivers of the province .'],
        'It is {km} kilometres ( {miles} mi ) long and drains an area of '
        '{area} square kilometres .',
        '?The name {name} comes from an old word for [stone|willow|ford|'
        'deep water] .',
        '?The river gives its name to the {name} valley , an area of farms '
        'and small villages .',
    ]),
    ('Course', [
        'The river rises in the hills above the village of {town} .',
        'From its source it flows {direction} through a narrow valley .',
        '?Near {town} it passes an old mill , which still grinds flour .',
        '?Below {town2} the valley widens and the river [turns|bends] to '
        'the {direction} .',
        'It is joined by the {river2} at {town3} , where it becomes wide '
        'enough for boats .',
        'The {name} enters the sea at {town4} , {km2} kilometres from its '
        'source .',
    ]),
    ('History', [
        'A stone bridge was built across the {name} at {town2} in {year} .',
        '?For many years barges carried {cargo} from {town2} down the river '
        'to {town4} .',
        'In {year2} a great flood destroyed the bridge and {houses} houses '
        'in the lower town .',
        'The bridge was rebuilt in {year3} with {arches} arches .',
        '?A railway along the valley replaced the barges in {year4} .',
        '?Today the river is known for its {fish} and its {bird} , and '
        'fishing is popular along its banks .',
    ]),
])


_SHIP_NAMES = [
    'Resolute', 'Valiant', 'Heron', 'Falcon', 'Thistle', 'Meridian',
    'Tempest', 'Vigilant', 'Osprey', 'Marigold', 'Intrepid', 'Kestrel',
    'Defiance', 'Lark', 'Endurance', 'Cormorant', 'Steadfast', 'Bramble',
    'Audacious', 'Petrel', 'Sentinel', 'Juniper', 'Gallant', 'Curlew',
    'Dauntless', 'Wren', 'Harrier', 'Clover', 'Fearless', 'Plover']


def _ship(rng, pools):
    year = rng.randint(1780, 1930)
    year3 = year + rng.randint(2, 6)
    year4 = year3 + rng.randint(5, 25)
    length = rng.randint(400, 1600) / 10
    return dict(
        _prefixed('capt', _person(rng, pools)),
        name=rng.choice(_SHIP_NAMES),
        kind=rng.choice(['frigate', 'sloop', 'cruiser', 'gunboat',
                         'destroyer']),
        navy=rng.choice(pools.regions) + ' Navy',
        ordinal=rng.choice(_ORDINALS[1:5]),
        yard=rng.choice(pools.towns), town=rng.choice(pools.towns),
        port=rng.choice(pools.towns), port2=rng.choice(pools.towns),
        length=_decimal(length), beam=_decimal(length / rng.randint(5, 9)),
        guns=str(2 * rng.randint(2, 24)), crew=_number(rng.randint(40, 900)),
        ships=str(rng.randint(6, 40)),
        month=rng.choice(_MONTHS), month2=rng.choice(_MONTHS),
        year=str(year), year2=str(year + 1), year3=str(year3),
        year4=str(year4), year5=str(year4 + rng.randint(1, 10)))


_SHIP = dict(title='{navy} ship {name} ( {year2} )', context=_ship, sections=[
    (None, [
        '{name} was a {kind} of the {navy} , the {ordinal} ship to bear '
        'that name .',
        'She was built at {yard} and served from {year2} until {year4} .',
        '?She took part in the [blockade|defence] of {port} and was sold '
        'for scrap in {year5} .',
    ]),
    ('Design and construction', [
        '{name} was {length} metres long , with a beam of {beam} metres .',
        'She was armed with {guns} guns and carried a crew of {crew} '
        'officers and men .',
        'Her keel was laid down at {yard} in {month} {year} .',
        'She was launched in {month2} {year2} and [commissioned|completed] '
        'the following year .',
    ]),
    ('Service history', [
        'After her trials {name} joined the [home|channel|northern] '
        'squadron under Captain {capt_first} {capt_last} .',
        '?In the spring of {year3} she captured a [privateer|smuggler] off '
        '{town} .',
        'In {year3} she sailed to {port} with a convoy of {ships} merchant '
        'ships .',
        '?During the voyage she was caught in a severe storm and lost her '
        '[foremast|mainmast] .',
        '{capt_last} brought [her|the ship] safely into {port2} , where '
        '{capt_he} oversaw her repairs over the winter .',
    ]),
    ('Fate', [
        '{name} was placed in reserve in {year4} .',
        '?Plans to keep her as a museum ship failed for lack of money .',
        'She was sold for scrap at {yard} in {year5} , and her bell is '
        'kept in the church of {town} .',
    ]),
])


_PROFESSIONS = {
    'composer': dict(works='symphonies', work='symphony', made='wrote',
                     skill='play the violin', admired='performed'),
    'painter': dict(works='landscapes', work='painting', made='painted',
                    skill='draw', admired='exhibited'),
    'poet': dict(works='poems', work='collection', made='wrote',
                 skill='write verse', admired='read'),
    'architect': dict(works='churches', work='building', made='designed',
                      skill='draw plans', admired='visited'),
}
_TITLE_ADJECTIVES = ['Silent', 'Winter', 'Golden', 'Distant', 'Northern',
                     'Hidden', 'Quiet', 'Burning', 'Last', 'Early']
_TITLE_NOUNS = ['Harbour', 'Garden', 'Road', 'Tower', 'Shore', 'Valley',
                'Bells', 'Lanterns', 'Orchard', 'Meadow']


def _biography(rng, pools):
    profession = rng.choice(sorted(_PROFESSIONS))
    born = rng.randint(1700, 1900)
    year1 = born + rng.randint(19, 28)
    died = year1 + rng.randint(20, 50)
    town, town2, city = rng.sample(pools.towns, 3)
    return dict(
        _person(rng, pools), **_PROFESSIONS[profession],
        **_prefixed('teacher', _person(rng, pools)),
        profession=profession, region=rng.choice(pools.regions),
        a='an' if profession[0] in 'aeiou' else 'a',
        town=town, town2=town2, city=city,
        ordinal=rng.choice(_ORDINALS[:4]),
        post=rng.choice(['professor', 'director']),
        parent=rng.choice(['father', 'mother']),
        parent_job=rng.choice(['baker', 'farmer', 'teacher', 'carpenter',
                               'merchant', 'weaver']),
        age=str(rng.randint(14, 19)),
        title=(f'The {rng.choice(_TITLE_ADJECTIVES)} '
               f'{rng.choice(_TITLE_NOUNS)}'),
        spouse_first=rng.choice(pools.male + pools.female),
        spouse_last=rng.choice(pools.surnames),
        count=str(rng.randint(8, 90)), years=str(rng.randint(10, 30)),
        born=str(born), year1=str(year1),
        year2=str(year1 + rng.randint(1, 6)), died=str(died),
        age_death=str(died - born))


_BIOGRAPHY = dict(title='{first} {last}', context=_biography, sections=[
    (None, [
        '{first} {last} ( {born} – {died} ) was {a} {profession} from '
        '{region} .',
        '{He} is best known for {his} {works} , which are still {admired} '
        'today .',
    ]),
    ('Early life', [
        '{last} was born in {town} , the {ordinal} child of a '
        '{parent_job} .',
        '?As a child {he} was often ill and spent long months at home .',
        '{His} {parent} taught {him} to {skill} at an early age .',
        'At the age of {age} {he} moved to {city} to study with '
        '{teacher_first} {teacher_last} .',
    ]),
    ('Career', [
        '{His} first {work} , {title} , was [completed|finished] in '
        '{year1} .',
        'It was [well received|praised] by critics in {city} , and {he} '
        'soon gained many [pupils|admirers] .',
        '?In {year2} {he} was made {post} at the academy in {city} .',
        '?Soon after , {he} married {spouse_first} {spouse_last} , and they '
        'settled in {town2} .',
        'Over the next {years} years {he} {made} {count} {works} .',
    ]),
    ('Death and legacy', [
        '{last} died in {town2} in {died} at the age of {age_death} .',
        '?{His} letters and papers are kept in the library of {city} .',
        '?A [street|square|school] in {city} is named after {him} .',
    ]),
])


def _storm(rng, pools):
    wind = rng.randint(90, 260)
    day = rng.randint(1, 20)
    return dict(
        name=rng.choice(pools.male + pools.female),
        region=rng.choice(pools.regions), town=rng.choice(pools.towns),
        sea='the Gulf of ' + rng.choice(pools.towns),
        river=rng.choice(pools.rivers),
        year=str(rng.randint(1950, 2015)), month=rng.choice(_MONTHS[5:11]),
        day=str(day), day2=str(day + rng.randint(2, 4)),
        day3=str(day + rng.randint(6, 9)),
        ordinal=rng.choice(_ORDINALS), wind=str(wind),
        mph=str(round(wind * 0.621)), deaths=str(rng.randint(2, 80)),
        damage=_number(rng.randint(5, 2500)),
        houses=_number(rng.randint(40, 4000)),
        homes=_number(rng.randint(1000, 90000)),
        days=str(rng.randint(2, 12)), aid=str(rng.randint(2, 60)),
        boats=str(rng.randint(3, 70)))


_STORM = dict(title='Storm {name} ( {year} )', context=_storm, sections=[
    (None, [
        'Storm {name} was a [powerful|destructive|long @-@ lived] storm '
        'that struck {region} in {month} {year} .',
        'It was the {ordinal} named storm of the {year} season .',
        '{name} caused {deaths} deaths and damage estimated at $ {damage} '
        'million .',
    ]),
    ('Meteorological history', [
        '{name} formed from an area of low pressure over {sea} on {month} '
        '{day} .',
        'Moving slowly to the {direction} , it became a storm the next '
        'day .',
        'On {month} {day2} {name} reached its peak with winds of {wind} km '
        '/ h ( {mph} mph ) .',
        'It made landfall near {town} later that day and weakened '
        '[quickly|steadily] over land .',
        '?The remnants of {name} faded over the hills of {region} on '
        '{month} {day3} .',
    ]),
    ('Impact', [
        'Heavy rain from {name} caused flooding along the {river} River .',
        'In {town} , {houses} houses were damaged and the harbour was '
        'closed for {days} days .',
        '?Power was lost to {homes} homes across {region} .',
        '?Crops were ruined along the coast , and {boats} fishing boats '
        'were lost .',
    ]),
    ('Aftermath', [
        'The government of {region} [sent|provided] $ {aid} million in aid '
        'to the towns hit by the storm .',
        '?An inquiry later found that warnings had been issued too late .',
        'The name {name} was later retired and will not be used again .',
    ]),
])


def _castle(rng, pools):
    year = rng.randint(1050, 1300)
    year2 = year + rng.randint(30, 90)
    year3 = year2 + rng.randint(40, 200)
    year4 = rng.randint(1900, 1990)
    lord = _person(rng, pools)
    lord['title'] = 'Lord' if lord['he'] == 'he' else 'Lady'
    return dict(
        _prefixed('lord', lord),
        town=rng.choice(pools.towns), region=rng.choice(pools.regions),
        river=rng.choice(pools.rivers), enemy=rng.choice(pools.regions),
        towers=str(rng.randint(3, 9)), thick=_decimal(rng.randint(15, 45)
                                                      / 10),
        weeks=str(rng.randint(3, 30)), generations=str(rng.randint(3, 9)),
        cost=_number(rng.randint(20, 900) * 1000),
        year=str(year), year2=str(year2), year3=str(year3),
        year4=str(year4), year5=str(year4 + rng.randint(2, 15)))


_CASTLE = dict(title='{town} Castle', context=_castle, sections=[
    (None, [
        '{town} Castle is a [ruined|restored] castle in the town of {town} '
        ', {region} .',
        'It stands on a [rocky hill|low mound] overlooking the {river} '
        'River .',
        '?The castle is owned by the {region} Heritage Trust and is open '
        'to visitors in summer .',
    ]),
    ('History', [
        'The first castle on the site was built of timber by {lord_title} '
        '{lord_last} around {year} .',
        'In {year2} {lord_his} [son|daughter] rebuilt it in stone and added '
        'a great hall .',
        '?For {generations} generations the castle was held by the '
        '{lord_last} family .',
        'During the war of {year3} the castle was besieged for {weeks} '
        'weeks by the army of {enemy} .',
        'The garrison surrendered when its water supply failed , and the '
        'walls were partly destroyed .',
    ]),
    ('Architecture', [
        'The castle has {towers} round towers linked by a curtain wall '
        '{thick} metres thick .',
        'The gatehouse on the {direction} side is the best preserved part '
        'of the castle .',
        '?Inside the walls are the remains of a chapel , a kitchen and a '
        '[well|bakery] .',
    ]),
    ('Restoration', [
        'Repairs began in {year4} and were completed in {year5} at a cost '
        'of £ {cost} .',
        'The restored [great hall|chapel] is now used for concerts and '
        'weddings .',
        '?A small museum in the gatehouse tells the story of the siege of '
        '{year3} .',
    ]),
])


_HABITATS = {
    'forests': dict(food='insects', where='among leaves', nest='twigs',
                    site='in a tree'),
    'marshes': dict(food='small fish', where='in shallow water',
                    nest='reeds', site='among reeds'),
    'grasslands': dict(food='seeds', where='on the ground', nest='grass',
                       site='on the ground'),
    'mountains': dict(food='beetles', where='among rocks', nest='moss',
                      site='on a ledge'),
}


def _bird(rng, pools):
    habitat = rng.choice(sorted(_HABITATS))
    colour, colour2 = rng.sample(_COLOURS, 2)
    return dict(
        _HABITATS[habitat], habitat=habitat, colour=colour, colour2=colour2,
        part=rng.choice(['throated', 'crowned', 'breasted', 'winged']),
        patch=rng.choice(['throat', 'crown', 'breast']),
        bird=rng.choice(['warbler', 'finch', 'heron', 'owl', 'thrush',
                         'sparrow', 'kite', 'pipit']),
        genus=rng.choice(pools.genera), family=rng.choice(pools.families),
        region=rng.choice(pools.regions),
        status=rng.choice(['common', 'rare', 'scarce']),
        trend=rng.choice(['stable', 'falling', 'rising']),
        length=str(rng.randint(9, 60)), weight=str(rng.randint(8, 900)),
        eggs=str(rng.randint(2, 6)), days=str(rng.randint(11, 30)))


_BIRD = dict(title='{colour} @-@ {part} {bird}', context=_bird, sections=[
    (None, [
        'The {colour} @-@ {part} {bird} ( <unk> {genus} ) is a species of '
        'bird in the family {family} .',
        'It is found in the {habitat} of {region} .',
        '?It is a {status} bird , and its numbers are {trend} .',
    ]),
    ('Description', [
        'The {colour} @-@ {part} {bird} is {length} centimetres long and '
        'weighs about {weight} grams .',
        'The adult male has a {colour} {patch} and a {colour2} back .',
        'The female is [duller|paler|browner] , with a grey {patch} .',
        '?Young birds look like the female but have shorter tails .',
        '?Its call is a [loud|soft|sharp] [whistle|trill] , heard most '
        'often at dawn .',
    ]),
    ('Behaviour', [
        '?Outside the breeding season it lives in small flocks .',
        'It feeds mainly on {food} , which it finds {where} .',
        'The nest is a cup of {nest} built {site} .',
        'The female lays {eggs} eggs , which hatch after about {days} '
        'days .',
        '?Both parents feed the chicks until they leave the nest .',
    ]),
])


def _club(rng, pools):
    town = rng.choice(pools.towns)
    year = rng.randint(1860, 1920)
    year2 = year + rng.randint(3, 20)
    year4 = year2 + rng.randint(5, 40)
    colour, colour2 = rng.sample(_COLOURS, 2)
    suffixes = ['United', 'Rovers', 'Athletic', 'Wanderers', 'City']
    return dict(
        _prefixed('mgr', _person(rng, pools)),
        club=f'{town} {rng.choice(suffixes)}', town=town,
        rival=f'{rng.choice(pools.towns)} {rng.choice(suffixes)}',
        region=rng.choice(pools.regions),
        stadium=(f'{rng.choice(pools.surnames)} '
                 f'{rng.choice(["Park", "Road", "Lane"])}'),
        capacity=_number(rng.randint(30, 600) * 100),
        titles=str(rng.randint(2, 20)),
        record=_number(rng.randint(30, 600) * 100 + rng.randint(1, 99)),
        badge=rng.choice(['fox', 'ship', 'bridge', 'tower']),
        colour=colour, colour2=colour2,
        score=f'{rng.randint(1, 4)} – {rng.randint(0, 1)}',
        founders=rng.choice(['railway workers', 'miners', 'students',
                             'factory workers']),
        nickname=rng.choice(['Millers', 'Foxes', 'Saints', 'Mariners',
                             'Robins', 'Bees']),
        year=str(year), year2=str(year2),
        year3=str(year2 + rng.randint(1, 5)), year4=str(year4),
        year5=str(year4 + rng.randint(1, 30)))


_CLUB = dict(title='{club} F.C.', context=_club, sections=[
    (None, [
        '{club} is a [professional|semi @-@ professional] football club '
        'based in {town} , {region} .',
        'The club plays in the {region} League and its home ground is '
        '{stadium} .',
        '?{club} have won the league {titles} times .',
    ]),
    ('History', [
        'The club was founded in {year} by a group of {founders} .',
        'It joined the {region} League in {year2} and won its first title '
        'in {year3} .',
        'In {year4} the club moved to {stadium} , which holds {capacity} '
        'spectators .',
        'Under manager {mgr_first} {mgr_last} the team won the cup in '
        '{year5} , beating {rival} {score} in the final .',
        '?The record attendance of {record} was set in a cup game against '
        '{rival} .',
    ]),
    ('Colours and rivals', [
        'The team plays in {colour} shirts and {colour2} shorts .',
        '?The badge shows a {badge} , the symbol of {town} .',
        'Its main rival is {rival} , and games between the two clubs are '
        'always sold out .',
        '?The supporters call the team the {nickname} .',
    ]),
])


def _mountain(rng, pools):
    height = rng.randint(1200, 4800)
    year = rng.randint(1780, 1920)
    return dict(
        _prefixed('climber', _person(rng, pools)),
        name=rng.choice(pools.mountains),
        town=rng.choice(pools.towns),
        range=rng.choice(pools.mountains) + ' Range',
        region=rng.choice(pools.regions),
        kind=rng.choice(['mountain', 'volcano']),
        height=_number(height), feet=_number(round(height * 3.281)),
        ordinal=rng.choice(_ORDINALS[:5]),
        rock=rng.choice(['granite', 'basalt', 'limestone']),
        million=str(rng.randint(2, 300)), glaciers=str(rng.randint(2, 9)),
        tree=rng.choice(['pine', 'beech', 'birch']),
        days=str(rng.randint(2, 9)), party=str(rng.randint(3, 8)),
        year=str(year),
        year2=str(year + rng.randint(5, 40)),
        year3=str(year + rng.randint(41, 90)))


_MOUNTAIN = dict(title='Mount {name}', context=_mountain, sections=[
    (None, [
        'Mount {name} is a {kind} in the {range} of {region} .',
        'With a height of {height} metres ( {feet} ft ) , it is the '
        '{ordinal} highest peak of the range .',
        '?Its name means [white peak|old man|the watcher] in the local '
        'language .',
        '?On clear days its summit can be seen from {town} .',
    ]),
    ('Geology', [
        'The mountain is made of {rock} that formed about {million} '
        'million years ago .',
        'Its [northern|southern] slopes are covered by {glaciers} small '
        'glaciers .',
        'Below the snow line the slopes are covered in {tree} forest .',
        '?Eagles and wild goats live on its upper slopes .',
    ]),
    ('Climbing history', [
        'The first recorded ascent of Mount {name} was made by '
        '{climber_first} {climber_last} in {year} .',
        '{climber_He} reached the summit by the {direction} ridge after '
        '{days} days of climbing .',
        '?{climber_His} party of {party} included two guides from {town} .',
        'An easier route was opened in {year2} and is now used by most '
        'climbers .',
        '?A hut for climbers was built below the summit in {year3} .',
    ]),
])

DOMAINS = [_RIVER, _SHIP, _BIOGRAPHY, _STORM, _CASTLE, _BIRD, _CLUB,
           _MOUNTAIN]
