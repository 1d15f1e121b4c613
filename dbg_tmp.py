from ctxledger.pipelines.memory import cues, patterns
from ctxledger.pipelines.memory.classify import MiniLMEncoder, PrototypeClassifier, kind_prototypes
from ctxledger.pipelines.memory.extract import RuleExtractor
from ctxledger.pipelines.memory.text import Sentence
from ctxledger.schemas.policy import load_policy
s = load_policy().memory
enc = MiniLMEncoder()
k = PrototypeClassifier(enc, kind_prototypes(s), s.kind_threshold, 0.0, reject=None)
for t in ["I maintain the ingest service, it's all rust", "I maintain the ingest service", "I'm a high school chemistry teacher"]:
    print(RuleExtractor._classifiable(Sentence(t,0,len(t))), k.classify([t]), k.scores(enc([t])).round(2), t)
