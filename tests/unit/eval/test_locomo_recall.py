"""``eval.locomo_recall``: how LoCoMo turns and questions are read and scored.

The sample below is written for this test in the LoCoMo format
(snap-research/LoCoMo, ``data/locomo10.json``); no LoCoMo text is copied.
"""

from __future__ import annotations

from eval.locomo_recall import questions_of, recall, session_of, turns_of

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I started pottery."},
            {
                "speaker": "Bo",
                "dia_id": "D1:2",
                "text": "Look at this!",
                "img_url": ["x"],
                "blip_caption": "a photo of a red bowl",
            },
        ],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Sold a bowl."}],
    },
    "qa": [
        {
            "question": "What did Ana start?",
            "answer": "pottery",
            "evidence": ["D1:1"],
            "category": 1,
        },
        {"question": "Unanswerable?", "evidence": ["D2:1"], "category": 5},
        {"question": "No label?", "evidence": [], "category": 2},
        {"question": "Both?", "evidence": ["D1:2", " D2:1"], "category": 4},
    ],
}


def test_turns_carry_speaker_caption_and_session():
    turns = turns_of(SAMPLE)
    assert [t.dia_id for t in turns] == ["D1:1", "D1:2", "D2:1"]
    assert [t.session for t in turns] == ["D1", "D1", "D2"]
    assert turns[0].text == "Ana: I started pottery."
    assert turns[1].text == "Bo: Look at this! [image: a photo of a red bowl]"


def test_adversarial_and_unlabelled_questions_are_left_out():
    assert questions_of(SAMPLE) == [
        ("What did Ana start?", {"D1:1"}),
        ("Both?", {"D1:2", "D2:1"}),
    ]


def test_turn_and_session_recall():
    assert session_of("D12:3") == "D12"
    assert recall(["D1:2", "D1:1", "D2:1"], {"D1:2", "D2:1"}, 1) == (0.5, 0.5)
    assert recall(["D1:1", "D1:2", "D2:1"], {"D1:2", "D2:1"}, 2) == (0.5, 0.5)
    assert recall(["D1:1", "D1:2", "D2:1"], {"D1:2", "D2:1"}, 3) == (1.0, 1.0)
    assert recall(["D1:1"], {"D1:2"}, 5) == (0.0, 1.0)
