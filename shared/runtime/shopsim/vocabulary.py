"""The English catalogue vocabulary: departments, sub-categories, attribute dimensions, option
axes and price ranges the generator draws from.

Every attribute value of a sub-category must stay distinguishable under the reward's fuzzy
rule (token-set ratio <= 85 against every other value, no value a substring of another), or a
near-identical distractor would count as matching; `vocabulary_problems` checks that and a test
keeps it empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.runtime.shopsim.reward.text import token_set_ratio


@dataclass(frozen=True)
class AxisSpec:
    name: str
    values: tuple[str, ...]
    # Per-value price increments when this axis sets the price (None: the axis never does).
    increments: tuple[float, ...] | None = None
    contiguous: bool = False  # products offer a contiguous run (sizes), else any subset


@dataclass(frozen=True)
class SubCategory:
    department: str
    group: str
    name: str
    noun: str
    dims: tuple[tuple[str, tuple[str, ...]], ...]
    axes: tuple[AxisSpec, ...]
    price_range: tuple[float, float]
    title_dims: tuple[str, ...] = field(default=())

    @property
    def path(self) -> str:
        return f"{self.department} › {self.group} › {self.name}"

    def values(self) -> list[str]:
        return [value for _, values in self.dims for value in values]


COLORS = (
    "black", "white", "navy blue", "forest green", "burgundy", "charcoal gray",
    "sky blue", "blush pink", "sand beige", "mustard yellow",
)  # fmt: skip
APPAREL_SIZES = AxisSpec("size", ("xs", "s", "m", "l", "xl", "xxl"), (0, 0, 0, 0, 2, 4), True)


def _color(values: tuple[str, ...] = COLORS) -> AxisSpec:
    return AxisSpec("color", values)


def _sub(
    department: str,
    group: str,
    name: str,
    noun: str,
    price_range: tuple[float, float],
    axes: tuple[AxisSpec, ...],
    **dims: tuple[str, ...],
) -> SubCategory:
    items = tuple((key.replace("_", " "), values) for key, values in dims.items())
    return SubCategory(
        department, group, name, noun, items, axes, price_range, tuple(k for k, _ in items[:2])
    )


SUBCATEGORIES: tuple[SubCategory, ...] = (
    # Electronics
    _sub("Electronics", "Audio", "Headphones", "headphones", (25, 320), (_color(),),
         noise=("active noise cancelling", "passive isolation", "ambient sound mode"),
         fit=("over-ear cushions", "on-ear pads", "foldable hinges"),
         connectivity=("bluetooth 5.3", "wired aux jack", "dual pairing"),
         battery=("60h playtime", "quick charge", "replaceable battery"),
         extras=("built-in microphone", "carrying pouch", "volume limiter"),
         material=("memory foam", "protein leather", "breathable mesh")),
    _sub("Electronics", "Audio", "Earbuds", "earbuds", (15, 250), (_color(),),
         noise=("active noise cancelling", "passive isolation", "ambient sound mode"),
         water=("ipx7 waterproof", "sweat resistant", "splash proof"),
         case=("wireless charging case", "usb-c case", "compact pocket case"),
         fit=("ear hooks", "silicone tips", "stem design"),
         controls=("touch controls", "physical buttons", "voice assistant"),
         codec=("aptx adaptive", "ldac support", "aac codec")),
    _sub("Electronics", "Audio", "Bluetooth Speakers", "bluetooth speaker", (20, 400),
         (_color(("black", "white", "navy blue", "forest green", "burgundy", "sky blue")),),
         sound=("360 degree sound", "deep bass boost", "stereo pairing"),
         water=("ipx7 waterproof", "dustproof shell", "floating body"),
         power=("24h runtime", "powerbank output", "solar panel"),
         build=("rugged rubber", "fabric grille", "aluminum body"),
         extras=("carabiner strap", "party lights", "speakerphone"),
         size=("palm sized", "tabletop", "boombox")),
    _sub("Electronics", "Wearables", "Smartwatches", "smartwatch", (40, 450),
         (_color(("black", "white", "charcoal gray", "blush pink", "navy blue")),
          AxisSpec("band size", ("small band", "large band"))),
         health=("heart rate monitor", "blood oxygen sensor", "sleep tracking"),
         display=("amoled screen", "always-on display", "sapphire glass"),
         gps=("built-in gps", "connected gps", "dual band positioning"),
         battery=("14 day battery", "wireless charging", "solar charging"),
         water=("5atm water rating", "swim tracking", "diving grade"),
         case=("titanium case", "polymer case", "ceramic bezel")),
    _sub("Electronics", "Mobile Accessories", "Phone Cases", "phone case", (8, 60),
         (_color(), AxisSpec("model", ("iphone 16", "galaxy s24", "pixel 9", "moto edge 50"))),
         protection=("military drop tested", "raised camera lip", "shock absorbing corners"),
         material=("clear polycarbonate", "silicone", "vegan leather"),
         feature=("magsafe compatible", "kickstand", "card slot"),
         grip=("anti-slip texture", "glossy finish", "matte coating"),
         profile=("slim fit", "heavy duty", "folio wallet"),
         extra=("lanyard loop", "screen protector included", "antimicrobial")),
    _sub("Electronics", "Mobile Accessories", "Power Banks", "power bank", (15, 150),
         (_color(("black", "white", "sky blue", "blush pink")),
          AxisSpec("capacity", ("slim 10000mah", "travel 20000mah", "jumbo 26800mah"),
                   (0, 12, 25))),
         charging=("65w power delivery", "qi wireless pad", "trickle mode"),
         ports=("dual usb-c", "built-in cables", "ac outlet"),
         display=("digital percentage", "led indicators", "smart app"),
         build=("airline approved", "magnetic snap", "rugged shell"),
         size=("pocket sized", "laptop grade", "slim card"),
         safety=("overheat protection", "pass-through charging", "fireproof casing")),
    _sub("Electronics", "Computer Accessories", "Keyboards", "keyboard", (20, 220),
         (_color(("black", "white", "charcoal gray", "blush pink")),
          AxisSpec("switch", ("red linear", "brown tactile", "blue clicky"))),
         layout=("tenkeyless", "full size", "compact 60 percent"),
         connection=("tri-mode wireless", "usb-c wired", "2.4ghz dongle"),
         keys=("hot-swappable", "pbt keycaps", "low profile"),
         light=("rgb backlight", "white backlit", "no lighting"),
         build=("aluminum frame", "gasket mount", "plastic chassis"),
         extra=("volume knob", "wrist rest", "mac layout")),
    _sub("Electronics", "Computer Accessories", "Computer Mice", "mouse", (10, 150),
         (_color(("black", "white", "charcoal gray", "sky blue")),),
         grip=("ergonomic vertical", "ambidextrous shape", "travel size"),
         sensor=("26000 dpi sensor", "optical tracking", "laser sensor"),
         connection=("tri-mode wireless", "usb-c wired", "2.4ghz dongle"),
         buttons=("silent clicks", "programmable buttons", "thumb wheel"),
         weight=("ultralight shell", "adjustable weights", "honeycomb body"),
         power=("rechargeable", "aa battery", "wireless charging")),
    _sub("Electronics", "Computer Accessories", "Monitors", "monitor", (90, 900),
         (AxisSpec("screen size", ("24in", "27in", "32in"), (0, 60, 140)),),
         panel=("ips panel", "va panel", "oled panel"),
         resolution=("4k uhd", "1440p qhd", "1080p fhd"),
         refresh=("144hz", "240hz", "60hz"),
         stand=("height adjustable", "vesa mount", "pivot stand"),
         ports=("usb-c 90w", "displayport", "kvm switch"),
         extra=("hdr400", "speakers built in", "blue light filter")),
    # Home & Kitchen
    _sub("Home & Kitchen", "Kitchen Appliances", "Blenders", "blender", (25, 400),
         (_color(("black", "white", "charcoal gray", "burgundy", "sand beige")),),
         power=("1500w motor", "900w base", "quiet motor"),
         jar=("glass jar", "tritan pitcher", "single serve cups"),
         blades=("stainless blades", "crushing blades", "removable blades"),
         programs=("smoothie program", "pulse mode", "self cleaning"),
         capacity=("64 oz", "48 oz", "personal size"),
         extra=("tamper included", "travel lid", "recipe book")),
    _sub("Home & Kitchen", "Kitchen Appliances", "Coffee Makers", "coffee maker", (25, 600),
         (_color(("black", "white", "charcoal gray", "burgundy")),),
         brew=("drip brewer", "single serve pods", "espresso pump"),
         carafe=("thermal carafe", "glass carafe", "no carafe"),
         features=("programmable timer", "milk frother", "built-in grinder"),
         capacity=("12 cup", "4 cup", "travel mug size"),
         filter=("permanent filter", "paper filters", "charcoal water filter"),
         finish=("brushed steel", "matte plastic", "copper accents")),
    _sub("Home & Kitchen", "Cookware", "Cookware Sets", "cookware set", (40, 500),
         (AxisSpec("set size", ("starter edition", "family edition", "chef collection"),
                   (0, 40, 90)),),
         material=("hard anodized", "tri-ply stainless", "cast iron"),
         coating=("ceramic nonstick", "pfoa free", "uncoated"),
         stove=("induction ready", "gas only", "oven safe"),
         handles=("stay-cool handles", "riveted handles", "detachable handles"),
         care=("dishwasher safe", "hand wash", "seasoned"),
         lids=("tempered glass lids", "steel lids", "vented lids")),
    _sub("Home & Kitchen", "Cookware", "Knife Sets", "knife set", (20, 400),
         (_color(("black", "white", "forest green", "charcoal gray")),),
         steel=("german steel", "japanese vg10", "damascus pattern"),
         block=("acacia block", "magnetic strip", "knife roll"),
         pieces=("complete collection", "essentials kit", "chef trio"),
         handles=("pakkawood handles", "ergonomic polymer", "hollow steel"),
         extras=("honing rod", "kitchen shears", "blade guards"),
         edge=("full tang", "serrated edge", "granton edge")),
    _sub("Home & Kitchen", "Kitchen Storage", "Water Bottles", "water bottle", (8, 60),
         (_color(), AxisSpec("size", ("18 oz", "24 oz", "32 oz", "40 oz"), (0, 3, 6, 9))),
         insulation=("vacuum insulated", "double wall", "single wall"),
         lid=("straw lid", "chug cap", "flip spout"),
         material=("stainless steel", "tritan plastic", "glass body"),
         features=("leakproof", "carry handle", "time markings"),
         finish=("powder coat", "sweat proof", "matte textured"),
         care=("dishwasher safe", "hand wash", "bpa free")),
    _sub("Home & Kitchen", "Bedding", "Bed Sheets", "sheet set", (20, 250),
         (_color(("white", "sand beige", "charcoal gray", "navy blue", "sky blue", "blush pink")),
          AxisSpec("bed size", ("twin", "full", "queen", "king"), (0, 10, 20, 30), True)),
         fabric=("egyptian cotton", "bamboo viscose", "brushed microfiber"),
         weave=("sateen weave", "percale weave", "jersey knit"),
         thread=("luxury 800tc", "400tc", "lightweight"),
         pocket=("deep pocket", "elastic corners", "standard pocket"),
         feel=("cooling", "wrinkle resistant", "hypoallergenic"),
         pieces=("4 piece set", "6 piece bundle", "fitted only")),
    _sub("Home & Kitchen", "Bedding", "Pillows", "pillow", (15, 150),
         (AxisSpec("size", ("standard", "queen", "king"), (0, 5, 10), True),),
         fill=("shredded memory foam", "down alternative", "goose down"),
         firmness=("medium firm", "soft plush", "extra firm"),
         sleeper=("side sleepers", "back sleepers", "stomach sleepers"),
         cover=("cooling cover", "bamboo cover", "cotton cover"),
         feature=("adjustable loft", "machine washable", "contour shape"),
         pack=("set of 2", "single pillow", "travel pillow")),
    _sub("Home & Kitchen", "Lighting", "Desk Lamps", "desk lamp", (15, 180),
         (_color(("black", "white", "charcoal gray", "sand beige", "forest green")),),
         light=("dimmable led", "color temperature control", "full spectrum"),
         arm=("swing arm", "gooseneck", "fixed stand"),
         power=("usb charging port", "wireless charger base", "battery powered"),
         control=("touch dimmer", "remote control", "auto sensor"),
         mount=("clamp mount", "weighted base", "wall mounted"),
         style=("mid century", "industrial look", "minimalist")),
    _sub("Home & Kitchen", "Cleaning", "Vacuum Cleaners", "vacuum", (60, 700),
         (_color(("black", "white", "charcoal gray", "burgundy")),),
         form=("cordless stick", "upright", "robot"),
         filter=("hepa filter", "washable filter", "cyclonic separation"),
         runtime=("60 minute runtime", "corded power", "swappable battery"),
         floors=("pet hair", "hardwood floors", "deep carpet"),
         bin=("self-emptying base", "large dustbin", "bagged"),
         extras=("led headlights", "crevice tool", "mopping pad")),
    _sub("Home & Kitchen", "Air Quality", "Air Purifiers", "air purifier", (50, 600),
         (_color(("white", "black", "charcoal gray")),),
         filter=("true hepa", "activated carbon", "uv-c light"),
         room=("large rooms", "bedroom size", "whole floor"),
         noise=("whisper quiet", "sleep mode", "turbo fan"),
         smart=("wifi app", "air quality sensor", "timer"),
         design=("tower shape", "compact cube", "wall mount"),
         extra=("aromatherapy pad", "night light", "filter indicator")),
    # Clothing
    _sub("Clothing", "Tops", "T-Shirts", "t-shirt", (8, 60), (_color(), APPAREL_SIZES),
         fabric=("organic cotton", "tri-blend", "merino wool"),
         fit=("slim fit", "relaxed fit", "oversized"),
         neck=("crew neck", "v-neck", "henley"),
         sleeve=("short sleeve", "long sleeve", "sleeveless"),
         care=("machine washable", "pre-shrunk", "tagless"),
         feature=("moisture wicking", "upf 50", "pocket tee")),
    _sub("Clothing", "Tops", "Hoodies", "hoodie", (20, 120), (_color(), APPAREL_SIZES),
         fabric=("fleece lined", "french terry", "cotton blend"),
         fit=("slim fit", "relaxed fit", "oversized"),
         closure=("full zip", "pullover", "quarter zip"),
         pocket=("kangaroo pocket", "zip pockets", "hidden phone pocket"),
         hood=("drawstring hood", "lined hood", "funnel neck"),
         feature=("thumb holes", "water repellent", "reflective trim")),
    _sub("Clothing", "Bottoms", "Jeans", "jeans", (25, 150),
         (AxisSpec("wash", ("dark indigo", "light wash", "black denim", "stone gray")),
          AxisSpec("waist", ("28", "30", "32", "34", "36", "38"), (0, 0, 0, 0, 3, 5), True)),
         fit=("skinny fit", "straight leg", "bootcut"),
         stretch=("stretch denim", "rigid denim", "comfort waistband"),
         rise=("high rise", "mid rise", "low rise"),
         fabric=("organic cotton", "recycled fibers", "selvedge"),
         detail=("distressed", "clean hem", "cuffed"),
         length=("regular length", "long inseam", "ankle length")),
    _sub("Clothing", "Shoes", "Running Shoes", "running shoes", (40, 220),
         (_color(("black", "white", "navy blue", "charcoal gray", "blush pink", "sky blue")),
          AxisSpec("shoe size", ("6", "7", "8", "9", "10", "11", "12"), None, True)),
         cushion=("max cushion", "responsive foam", "minimalist sole"),
         terrain=("road running", "trail grip", "treadmill"),
         support=("stability support", "neutral", "arch support"),
         upper=("knit upper", "mesh upper", "waterproof membrane"),
         drop=("zero drop", "8mm drop", "rocker geometry"),
         extras=("reflective details", "wide toe box", "carbon plate")),
    _sub("Clothing", "Accessories", "Socks", "socks", (6, 40),
         (_color(("black", "white", "charcoal gray", "navy blue")),
          AxisSpec("pack", ("3 pairs", "12 pairs"), (0, 14))),
         height=("crew height", "ankle", "no show"),
         fabric=("merino wool", "bamboo", "cotton"),
         cushion=("cushioned sole", "lightweight knit", "compression"),
         use=("hiking", "running", "dress"),
         feature=("seamless toe", "arch band", "odor control"),
         fit=("unisex", "ladies", "mens")),
    _sub("Clothing", "Outerwear", "Jackets", "jacket", (40, 350), (_color(), APPAREL_SIZES),
         insulation=("down fill", "synthetic fill", "unlined shell"),
         weather=("waterproof", "windproof", "water resistant"),
         style=("puffer", "parka", "bomber"),
         hood=("detachable hood", "fixed hood", "no hood"),
         pockets=("chest pocket", "interior pockets", "handwarmer pockets"),
         feature=("packable", "breathable", "fleece collar")),
    # Sports & Outdoors
    _sub("Sports & Outdoors", "Fitness", "Yoga Mats", "yoga mat", (15, 140),
         (_color(("black", "forest green", "blush pink", "sky blue", "burgundy", "sand beige")),
          AxisSpec("thickness", ("4mm", "6mm", "8mm"), (0, 5, 10))),
         material=("natural rubber", "tpe foam", "cork surface"),
         grip=("non-slip", "sticky texture", "dry grip"),
         size=("extra long", "standard length", "travel foldable"),
         feature=("alignment lines", "carrying strap", "reversible"),
         eco=("eco friendly", "latex free", "pvc free"),
         care=("easy clean", "antimicrobial", "odor resistant")),
    _sub("Sports & Outdoors", "Fitness", "Dumbbells", "dumbbells", (20, 400),
         (AxisSpec("weight", ("light 5lb", "15lb", "heavy 25lb", "max 50lb"), (0, 15, 35, 80)),),
         type=("adjustable", "fixed hex", "neoprene coated"),
         grip=("knurled handle", "contoured grip", "rubber grip"),
         set=("pair", "single", "with rack"),
         build=("cast iron", "steel plates", "urethane"),
         feature=("quick dial", "floor friendly", "compact storage"),
         use=("home gym", "rehab", "crossfit")),
    _sub("Sports & Outdoors", "Camping", "Tents", "tent", (50, 600),
         (_color(("forest green", "sand beige", "sky blue", "charcoal gray")),
          AxisSpec("capacity", ("two person", "four person", "six person"), (0, 40, 90))),
         season=("three season", "four season", "summer"),
         setup=("instant setup", "freestanding", "trekking pole"),
         weather=("rainfly", "waterproof floor", "taped seams"),
         weight=("ultralight", "car camping", "backpacking"),
         features=("vestibule", "mesh roof", "gear loft"),
         doors=("two doors", "single door", "screen room")),
    _sub("Sports & Outdoors", "Camping", "Backpacks", "backpack", (20, 300),
         (_color(("black", "forest green", "navy blue", "charcoal gray", "burgundy", "sand beige")),
          AxisSpec("volume", ("20l", "35l", "50l"), (0, 15, 30))),
         frame=("internal frame", "frameless", "external frame"),
         fabric=("ripstop nylon", "canvas", "recycled polyester"),
         access=("top loading", "panel loading", "roll top"),
         features=("hydration sleeve", "laptop compartment", "rain cover"),
         straps=("padded hip belt", "sternum strap", "load lifters"),
         use=("day hiking", "commuting", "travel carry-on")),
    _sub("Sports & Outdoors", "Cycling", "Bike Helmets", "bike helmet", (25, 250),
         (_color(("black", "white", "navy blue", "forest green", "mustard yellow")),
          AxisSpec("size", ("s", "m", "l"), None, True)),
         safety=("mips protection", "in-mold shell", "wavecel liner"),
         style=("road", "mountain", "commuter"),
         vents=("18 vents", "aero shell", "ventilated"),
         fit=("dial fit", "adjustable straps", "magnetic buckle"),
         light=("rear led", "integrated light", "reflective decals"),
         extra=("visor", "bug net", "eco liner")),
    # Beauty & Personal Care
    _sub("Beauty & Personal Care", "Hair Care", "Shampoo", "shampoo", (6, 60),
         (AxisSpec("size", ("8 oz", "16 oz", "32 oz"), (0, 6, 14)),),
         hair=("curly hair", "color treated", "fine hair"),
         free=("sulfate free", "paraben free", "silicone free"),
         ingredient=("argan oil", "tea tree", "biotin"),
         scent=("unscented", "citrus scent", "lavender scent"),
         benefit=("volumizing", "moisturizing", "clarifying"),
         ethics=("vegan", "cruelty free", "salon grade")),
    _sub("Beauty & Personal Care", "Skin Care", "Face Moisturizers", "face moisturizer",
         (8, 120), (AxisSpec("size", ("1.7 oz", "3.4 oz"), (0, 12)),),
         skin=("oily skin", "dry skin", "sensitive skin"),
         ingredient=("hyaluronic acid", "niacinamide", "ceramides"),
         spf=("spf 30", "no spf", "spf 50"),
         texture=("gel cream", "rich cream", "lotion"),
         free=("fragrance free", "oil free", "alcohol free"),
         claim=("dermatologist tested", "non-comedogenic", "clean beauty")),
    _sub("Beauty & Personal Care", "Oral Care", "Electric Toothbrushes", "electric toothbrush",
         (20, 300), (_color(("black", "white", "blush pink", "sky blue")),),
         motion=("sonic vibration", "oscillating head", "rotating bristles"),
         modes=("5 cleaning modes", "whitening mode", "gum care mode"),
         sensor=("pressure sensor", "smart timer", "bluetooth coaching"),
         battery=("30 day battery", "aa powered", "usb charging"),
         extras=("travel case", "2 brush heads", "uv sanitizer"),
         design=("slim handle", "waterproof body", "quiet operation")),
    _sub("Beauty & Personal Care", "Hair Tools", "Hair Dryers", "hair dryer", (20, 400),
         (_color(("black", "white", "blush pink", "burgundy")),),
         tech=("ionic technology", "ceramic heater", "tourmaline"),
         power=("1875 watts", "compact power", "high velocity motor"),
         attachments=("diffuser", "concentrator nozzle", "round brush"),
         settings=("3 heat settings", "cool shot", "auto temperature"),
         design=("foldable handle", "lightweight", "low noise"),
         voltage=("dual voltage", "single voltage", "travel friendly")),
    # Pet Supplies
    _sub("Pet Supplies", "Dogs", "Dog Food", "dog food", (15, 120),
         (AxisSpec("bag size", ("small 5lb bag", "15lb bag", "bulk 30lb bag"), (0, 18, 40)),),
         protein=("real chicken", "salmon recipe", "lamb and rice"),
         diet=("grain free", "limited ingredient", "high protein"),
         life=("puppy formula", "adult dogs", "senior dogs"),
         breed=("small breed", "large breed", "all breeds"),
         benefit=("joint support", "healthy digestion", "shiny coat"),
         made=("made in usa", "no fillers", "natural ingredients")),
    _sub("Pet Supplies", "Dogs", "Dog Beds", "dog bed", (20, 200),
         (_color(("charcoal gray", "sand beige", "navy blue", "burgundy")),
          AxisSpec("size", ("small", "medium", "large", "giant"), (0, 10, 20, 35), True)),
         support=("orthopedic foam", "bolster sides", "flat cushion"),
         cover=("removable cover", "waterproof liner", "chew resistant"),
         shape=("rectangular", "round donut", "elevated cot"),
         fabric=("faux fur", "canvas", "cooling gel"),
         base=("non-skid bottom", "raised frame", "foldable"),
         care=("machine washable", "spot clean", "quick dry")),
    _sub("Pet Supplies", "Cats", "Cat Litter", "cat litter", (8, 50),
         (AxisSpec("weight", ("10 lb", "20 lb", "40 lb"), (0, 8, 18)),),
         material=("clumping clay", "pine pellets", "silica crystals"),
         odor=("odor control", "unscented", "baking soda"),
         dust=("99 percent dust free", "low tracking", "lightweight formula"),
         cats=("multi-cat", "single cat", "kittens"),
         eco=("biodegradable", "flushable", "recycled paper"),
         feature=("health monitoring", "fast clumping", "long lasting")),
    # Office
    _sub("Office Products", "Furniture", "Office Chairs", "office chair", (80, 900),
         (_color(("black", "charcoal gray", "white", "navy blue")),),
         support=("lumbar support", "headrest", "adjustable armrests"),
         material=("mesh back", "bonded leather", "fabric seat"),
         recline=("tilt lock", "135 degree recline", "synchro tilt"),
         base=("aluminum base", "nylon base", "rocking base"),
         use=("ergonomic", "gaming", "drafting height"),
         capacity=("heavy duty 350 lbs", "standard capacity", "petite fit")),
    _sub("Office Products", "Paper", "Notebooks", "notebook", (5, 40),
         (_color(("black", "navy blue", "forest green", "burgundy", "sand beige")),
          AxisSpec("ruling", ("lined", "dot grid", "blank", "graph"))),
         cover=("hardcover", "softcover", "leather cover"),
         paper=("120 gsm paper", "fountain pen friendly", "recycled pages"),
         binding=("lay flat binding", "spiral bound", "sewn binding"),
         size=("a5 size", "pocket size", "letter size"),
         extras=("elastic closure", "ribbon bookmark", "back pocket"),
         pages=("numbered pages", "index pages", "perforated pages")),
    # Toys & Games
    _sub("Toys & Games", "Building", "Building Sets", "building set", (10, 200),
         (AxisSpec("pieces", ("starter edition", "deluxe edition", "collector edition"),
                   (0, 25, 60)),),
         theme=("space station", "city street", "medieval castle"),
         age=("young builders", "ages 10 plus", "adults"),
         feature=("motorized", "glow in dark", "minifigures"),
         compat=("compatible bricks", "magnetic tiles", "wooden blocks"),
         play=("stem learning", "display model", "playset"),
         storage=("storage box", "instruction booklet", "printed tiles")),
    _sub("Toys & Games", "Puzzles", "Jigsaw Puzzles", "jigsaw puzzle", (8, 50),
         (AxisSpec("pieces", ("300 big pieces", "1000 pieces", "2000 panoramic"), (0, 6, 14)),),
         theme=("landscape", "animals", "world map"),
         finish=("matte finish", "glossy", "linen texture"),
         cut=("random cut", "grid cut", "whimsy pieces"),
         extras=("poster included", "sorting trays", "glue sheets"),
         material=("recycled board", "wooden", "thick cardboard"),
         level=("family friendly", "challenging", "beginner")),
    # Grocery
    _sub("Grocery", "Beverages", "Coffee Beans", "coffee beans", (8, 60),
         (AxisSpec("bag", ("12 oz", "2 lb", "5 lb"), (0, 12, 35)),
          AxisSpec("grind", ("whole bean", "drip grind", "espresso grind"))),
         roast=("dark roast", "medium roast", "light roast"),
         origin=("colombian", "ethiopian", "sumatra"),
         cert=("fair trade", "usda organic", "rainforest alliance"),
         caffeine=("decaf", "caffeinated", "half caff"),
         notes=("chocolate notes", "fruity notes", "nutty notes"),
         process=("washed process", "natural process", "honey process")),
    _sub("Grocery", "Beverages", "Green Tea", "green tea", (5, 40),
         (AxisSpec("count", ("20 bags", "100 bags", "loose tin"), (0, 5, 11)),),
         type=("matcha", "sencha", "jasmine"),
         form=("loose leaf", "pyramid bags", "powder"),
         cert=("usda organic", "fair trade", "non-gmo"),
         flavor=("mint", "unflavored", "ginger"),
         origin=("japanese", "chinese", "korean"),
         caffeine=("decaf", "caffeinated", "low caffeine")),
    _sub("Grocery", "Pantry", "Olive Oil", "olive oil", (8, 70),
         (AxisSpec("bottle", ("500 ml", "1 liter", "family 3l"), (0, 9, 28)),),
         grade=("extra virgin", "light tasting", "pure"),
         press=("cold pressed", "first harvest", "unfiltered"),
         origin=("italian", "greek", "spanish"),
         cert=("usda organic", "pdo certified", "non-gmo"),
         flavor=("peppery", "buttery", "fruity"),
         packaging=("dark glass", "tin can", "squeeze bottle")),
    # Baby
    _sub("Baby", "Feeding", "Baby Bottles", "baby bottle", (8, 70),
         (AxisSpec("size", ("4 oz", "9 oz"), (0, 4)),
          AxisSpec("pack", ("2 pack", "4 pack"), None)),
         material=("glass", "silicone", "bpa free plastic"),
         nipple=("slow flow", "medium flow", "variable flow"),
         feature=("anti-colic vent", "wide neck", "self sterilizing"),
         shape=("angled", "ergonomic", "natural shape"),
         care=("dishwasher safe", "hand wash", "microwave safe"),
         age=("newborn", "6 months plus", "toddlers")),
    _sub("Baby", "Gear", "Strollers", "stroller", (80, 900),
         (_color(("black", "charcoal gray", "navy blue", "forest green", "sand beige")),),
         type=("lightweight travel", "jogging", "full size"),
         fold=("one hand fold", "compact fold", "self standing"),
         seat=("reversible seat", "full recline", "bassinet mode"),
         wheels=("all terrain wheels", "swivel wheels", "air tires"),
         system=("car seat compatible", "standalone", "travel system"),
         storage=("large basket", "cup holder", "parent console")),
    # Automotive
    _sub("Automotive", "Electronics", "Dash Cams", "dash cam", (30, 300),
         (AxisSpec("storage", ("32gb card", "64gb card", "128gb card"), (0, 8, 18)),),
         resolution=("4k recording", "1440p", "1080p"),
         channels=("front and rear", "front only", "three channel"),
         vision=("night vision", "wdr", "sony sensor"),
         features=("parking mode", "gps logging", "voice control"),
         connect=("wifi app", "wired only", "cloud upload"),
         mount=("suction mount", "adhesive mount", "mirror mount")),
    _sub("Automotive", "Tools", "Tire Inflators", "tire inflator", (20, 150),
         (_color(("black", "mustard yellow", "charcoal gray")),),
         power=("cordless battery", "12v plug", "ac adapter"),
         gauge=("digital gauge", "analog gauge", "preset shutoff"),
         pressure=("150 psi", "high volume", "fast inflation"),
         extras=("led flashlight", "nozzle adapters", "carry case"),
         use=("cars and suvs", "bikes", "sports balls"),
         design=("compact", "heavy duty", "handheld")),
    # Garden
    _sub("Garden", "Watering", "Garden Hoses", "garden hose", (15, 120),
         (_color(("forest green", "black", "sky blue")),
          AxisSpec("length", ("25 ft", "50 ft", "100 ft"), (0, 12, 30))),
         material=("rubber", "expandable", "polyurethane"),
         feature=("kink free", "lead free", "burst resistant"),
         fittings=("brass fittings", "aluminum fittings", "quick connect"),
         nozzle=("spray nozzle", "no nozzle", "10 pattern wand"),
         weight=("lightweight", "commercial grade", "flat hose"),
         storage=("hose reel", "storage bag", "wall hanger")),
    _sub("Garden", "Planters", "Plant Pots", "plant pot", (8, 90),
         (_color(("white", "black", "sand beige", "forest green", "charcoal gray")),
          AxisSpec("diameter", ("6 inch", "8 inch", "12 inch"), (0, 6, 15))),
         material=("ceramic", "terracotta", "fiberglass"),
         drainage=("drainage hole", "self watering", "saucer included"),
         style=("modern", "rustic", "geometric"),
         use=("indoor", "outdoor", "hanging"),
         set=("trio set", "single pot", "set of 5"),
         finish=("glazed", "matte", "speckled")),
)


# Words the generator's own templates put into titles and bullets; no value may hide in them.
TEMPLATE_TEXT = "features: ; built for everyday use. "


def vocabulary_problems(subcategories: tuple[SubCategory, ...] = SUBCATEGORIES) -> list[str]:
    """Every pair of values that the reward could confuse, per sub-category."""
    problems: list[str] = []
    names = [sub.name for sub in subcategories]
    if len(set(names)) != len(names):
        problems.append("duplicate sub-category names")
    for sub in subcategories:
        values = sub.values()
        if len(set(values)) != len(values):
            problems.append(f"{sub.name}: a value repeats across dimensions")
        fixed = " ".join([sub.noun, sub.path, TEMPLATE_TEXT]).casefold()
        for index, value in enumerate(values):
            if value != value.strip().lower() or "/" in value:
                problems.append(f"{sub.name}: {value!r} must be lower-case without '/'")
            if value.casefold() in fixed:
                problems.append(f"{sub.name}: {value!r} is inside fixed title/template text")
            for other in values[index + 1 :]:
                if value in other or other in value:
                    problems.append(f"{sub.name}: {value!r} and {other!r} nest")
                score = max(token_set_ratio(value, other), token_set_ratio(other, value))
                if score > 85:
                    problems.append(f"{sub.name}: {value!r} ~ {other!r} ({score})")
        option_values = [value for axis in sub.axes for value in axis.values]
        for index, value in enumerate(option_values):
            for other in option_values[index + 1 :]:
                score = max(token_set_ratio(value, other), token_set_ratio(other, value))
                if score > 85:
                    problems.append(f"{sub.name}: options {value!r} ~ {other!r} ({score})")
        for axis in sub.axes:
            if axis.increments is not None and len(axis.increments) != len(axis.values):
                problems.append(f"{sub.name}: axis {axis.name} increments do not fit its values")
        if len(sub.dims) < 5:
            problems.append(f"{sub.name}: needs at least 5 attribute dimensions")
    return problems
