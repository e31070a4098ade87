"""RACE: multiple-choice reading comprehension (middle- and high-school English exams)."""
