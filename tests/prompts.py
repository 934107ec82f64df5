"""Prompts for the exactness tests: copy-heavy edits, code continuation, free-form prose."""

COPY_HEAVY = [
    "Fix the spelling in this sentence and repeat it: The quick brwon fox jumpd over the lazzy dog "
    "while the farmer watchd from the porch, drinkng his mornng coffee.",
    "Rewrite this list with each item capitalised: apple, banana, cherry, date, elderberry, fig, "
    "grape, honeydew, kiwi, lemon, mango, nectarine.",
    "Correct the typos and return the paragraph: Speculative decodng lets a small draft modle "
    "propose tokens that the target modle then verifys in one pass.",
]
CODE = [
    "Complete this Python function:\n\ndef fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Continue this code:\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n",
]
PROSE = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain why the sky is blue to a ten year old.",
    "What are three good habits for staying healthy?",
]
ALL = COPY_HEAVY + CODE + PROSE
