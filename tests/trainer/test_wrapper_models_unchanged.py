"""The wrapper learners and the engines they share (``learners.search``) were made faster
without changing what they learn: every learner below must give, on every data set below,
the model recorded before the speed-ups, bit for bit.

Two fingerprints per (learner, data set), sha256 each:
- ``model``: the structure, parameters, variables and every CPT's bytes
  (``Model.checksum`` with the metadata left out);
- ``search``: the learner's own record of its search (accepted moves, CV accuracies,
  candidates evaluated, CB's orders), i.e. the metadata without what ``fit`` adds
  about the run (creation time, code version, training summary, estimator, arc CMI).

Regenerate (only when a model is meant to change) with
``python -m tests.trainer.test_wrapper_models_unchanged``, which prints the table.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import numpy as np
import pytest

from bnserve.trainer.data import EncodedData
from bnserve.trainer.fit import fit
from bnserve.trainer.learners.search import wrapper
from bnserve.trainer.learners.search.groups import grouped_parents
from bnserve.trainer.learners.search.wrapper import CrossValidatedAccuracy
from tests.data_helpers import dataset

LEARNERS = ("asb", "bsej", "cb", "ffss", "fss", "info-as", "k2", "k2-as", "k2-as-le", "stan")
SHIPPED = ("car", "hepatitis", "wine", "ecoli", "dermatology")
SHARED = {"connect-4": 5000, "splice": None, "kr-vs-kp": None, "tic-tac-toe": None, "adult-train": 4000}
FIT_KEYS = {"created_at", "code_version", "training", "data_fingerprint", "estimator", "preprocessing", "arc_cmi"}


def load_rows(name: str) -> EncodedData:
    """The data set, cut to its first rows where ``SHARED`` says so."""
    data = dataset(name)
    rows = SHARED.get(name)
    return data.subset(np.arange(min(rows, data.n_rows))) if rows else data


def fingerprints(algo: str, data: EncodedData) -> dict[str, str]:
    model = fit(algo, data)
    search = {k: v for k, v in model.metadata.items() if k not in FIT_KEYS}
    return {
        "model": replace(model, metadata={}).checksum(),
        "search": hashlib.sha256(json.dumps(search, sort_keys=True).encode()).hexdigest(),
    }


RECORDED: dict[str, dict[str, dict[str, str]]] = {
    "adult-train": {
        "asb": {
            "model": "d34b38c0b36d86d4cb722f1d7c7b754c9b48a4c27c776104ed702d002f3c1a46",
            "search": "be6694d14758138a6cb3f349291f36c17bf32314de2b61dbba979baed2ef6d06",
        },
        "bsej": {
            "model": "28785d4f990e422aa47f68c693b39b4ab259e65cbe4bc2487da1a7d787c25c1c",
            "search": "a2ca163e697ac18ee8359470fe5be86576ab9cacb25e1163550dde3031f84a41",
        },
        "cb": {
            "model": "f833c94b44db091f8ba69cd4f10a7157768464c1fe9e4cd194e566033d7e1629",
            "search": "1be2960aa7d877bdbfb3038c7441af63dddb1c0cac554014cc9d093bf4de5dc2",
        },
        "ffss": {
            "model": "03ad446633934885b19596f7c0c93105fb332c19df566b584134114050fbf23d",
            "search": "be6c0c57647a836badc7e0498a1270f45900a026e37fe99101045a6e8869fb7a",
        },
        "fss": {
            "model": "03a25910f5ecfb75555e3ccbbc3e646d6d532298687d72d4e08f384d700f701c",
            "search": "808bc5d34d3ff54cc79b53bbe25481a7e759ade14a70f1c172c31d73c23500e8",
        },
        "info-as": {
            "model": "d26bf6597b469585a020da379075e09443d26039fdfa2169f6b7d098aced2269",
            "search": "86c6fe1e5ddf1301035ce49e6aa00c74b664313329bee9b63e40e5dba2910cca",
        },
        "k2": {
            "model": "b26573cfd1ac3e74c1454077ac0efb129260abe1e3fb0a7e41aed5c91867e730",
            "search": "62f4a8ac86035aefa886cfb435993f6b9700c57a7946fe36ed93412d03117503",
        },
        "k2-as": {
            "model": "8f7787712121f382bf2a8ada19f14d97fd647fa3d28e45b7848db490cf2e50d6",
            "search": "3ff111dbd56e551bfdb7d7cb260c1af93c29e85fd8d7fb1e9e3aad0ebeb5834a",
        },
        "k2-as-le": {
            "model": "6f0328f773d7f462da24e8fb114bdbb81c1cc0b93bfe9e12761c99696f8c371d",
            "search": "64266f46882c5308e9c71e75184f068612648aee6aa42a852fb5331c58e514e9",
        },
        "stan": {
            "model": "08a8373d3eab6b798321e87fef5bd8a3b6c8e0d46c6f4dd48e3e67753a2839ee",
            "search": "e237dbb399c94ab00bb76b1c7fc8994d35485d2a6f6417167b05697295b2772a",
        },
    },
    "car": {
        "asb": {
            "model": "b6396245cb9a0bc020c7b36f32a6eaea313ce8bc936eb781f6297b5617b53ef4",
            "search": "eb6aefe3d05a48e640ae66742a9a603c28a7db8a1e83e0655fab85fc9f3401cd",
        },
        "bsej": {
            "model": "59b9d08d77f2bc451cea672592cbdedae4ce75d011e844d76f682417dd33062b",
            "search": "d5ea6dbed82f1bd471a6d7b9e79f689ffbfa562d20b654a7c2e7abf35083038b",
        },
        "cb": {
            "model": "94a32c693c7275ca510c92f3af57efa6a7b3cc0671d81e047018c6ef39b66e96",
            "search": "cb411edac193639f53218e23396ec649ae74ec5b7800894f4f9b67ae77fbcf07",
        },
        "ffss": {
            "model": "d4ff5880c87cda5a99592a9e66b56db3abf55ffd044458197afbb8b75db8c86f",
            "search": "5317c913a76a07b24948d52a632bc4291771496a05a64c38a6fdfa2b1bd7b9a0",
        },
        "fss": {
            "model": "37f6eac0215fab848c6c59ff5a2c2559f3bcb5c525d1ee93a581ca7fa26234a1",
            "search": "6c588d417982861dfae052ab85698d362b31591928d3cefaee7c53f9b39e4a54",
        },
        "info-as": {
            "model": "5f2ebe6ba1496377a8b1679b883d35a7f6a7f20be2fc9a95839576d3fa695270",
            "search": "86538ad2c96521393d5df2287bf5a9a007690820eb6c188bb149e0daa6923bb0",
        },
        "k2": {
            "model": "60028a8e0a3834953e006ed20e0fe3ac1d01e37b8dbeaccaca4d93fa6bfebf53",
            "search": "09d30370d8f232f9319597e5cff2dfc8937326d75489a99a25494b3f23670e43",
        },
        "k2-as": {
            "model": "c7d85d838f377da8c500448c3e25affac0d8c1eebf1fc38374cf3abb9df081c4",
            "search": "6844c997775231b81368e54f8ad201edd1642964ff610723487f324dd1311c3d",
        },
        "k2-as-le": {
            "model": "43bced29b4d8f908b1fbefd4d2ca5dfbc74154e2d714ad10893f1a4dcce1a3e0",
            "search": "39ee33c552b9724861791295d37bb4bd490bb2cd002a60aac82896b2b339763f",
        },
        "stan": {
            "model": "2bbdc01dbf478f4fbcdd0655e2e39921e2f30514196db9b7412ae663e0f59664",
            "search": "de15eb7bf40d8abbbddbe35beac3d9ace1dd33c81caec6f85133a1dbf3811596",
        },
    },
    "connect-4": {
        "asb": {
            "model": "99e3eb492b09ddfbb355b1a02e9b2e6508e8ff4a8e282923e59b6ea27402deba",
            "search": "d323613f5f9ee575b76937b76b9c9462c64b8c5d937098b6d5b88ff1f8324b2e",
        },
        "bsej": {
            "model": "ee06dd0573cb1e98e874601bed0c695628f3ef2638bf503ed5d4dabb6ef81778",
            "search": "ced27edf7fab51f494ab9d4051a6eff4ae128b8eda2de18a11085b242ed95ae7",
        },
        "cb": {
            "model": "dca91ffb384ba5072333c73ef4e8ae5092995c148117990af2244d415f3f106f",
            "search": "69dc2252511248866dae27eb6f8cf0e8e8a08a1dbc93665980ecff4dc3204daf",
        },
        "ffss": {
            "model": "e2e2cffc7c459843605adfc1ead4f84b6c02bc9211f685ed46f39c10c760b235",
            "search": "42cc37f7d16bf1bd76cba05576d9fcb3a4615048f3a44b1b0be8ba758b6073ea",
        },
        "fss": {
            "model": "63a6dad238a395e070d880cbaa9e7d510e500465e1a4b34719ba61d56956e844",
            "search": "c1d5442b13895d1824c43783beadcf091008a43e0f3a425b3aed53724aaec4d5",
        },
        "info-as": {
            "model": "9f6419c527a54589a21a07a4026c7172e4952f5cfc62146333666f8ae80f12ea",
            "search": "b469a58f27b6b7985566f5edb5a8cef6ed9a1ef09bd253e40597e59827884325",
        },
        "k2": {
            "model": "20e4e6225ffc9b9fdebb27a5d089da8321ef3ecef72789e0ba4b06e61d96b7e8",
            "search": "3934726c6dd731c3cf62d30702499830a4d764c17cb28ffeb0496a2b7634d55b",
        },
        "k2-as": {
            "model": "f99f5799197ef1bfb5d1621b2aa88297969521fb42ed35b778e10d95559b4ea1",
            "search": "00646d95f3eef6036e5b58bb6c0edb7be08236fd16c8071d40f2059d750dbff9",
        },
        "k2-as-le": {
            "model": "0d8724ac4655a6c8b21b437ae2c71904f42dc926d10a3c4753b24a310574cfc4",
            "search": "301577c30b6102d013a46ec07fea637bd3a0d3defd6ac90b2af47e2631a4e4f9",
        },
        "stan": {
            "model": "6e2133742a645aba5addabc32906195192ea2a03dc183e2d267a825b2e387d29",
            "search": "aca2197f763131bd7a0da9cb3ee25d03709e704d2f7bd4d14e70e62938224f99",
        },
    },
    "dermatology": {
        "asb": {
            "model": "6b11bb916dda94d83743f64339a24628789230d215f060d3787abf92d0d6de9c",
            "search": "7f2785748c358593369c65de64393dcd343ccd347da3c9d71faeab4f73b5ac8c",
        },
        "bsej": {
            "model": "366d879abd69d40ef59cbbe8be5ed459337d3b2033e8702456221b7d809d829e",
            "search": "3f8b21065fc3dce7c7e784e92806cfd8a4edbf4bb9f6c0976c751c25aca511fe",
        },
        "cb": {
            "model": "a841c57ea63118457032b3fd88aa48b9293c8589315bd1440de416c197b6d3d0",
            "search": "48692afb18ebf0f04edf5a06e7fff30a9ea07b4ee0a6e9b639b8fea25b1acc49",
        },
        "ffss": {
            "model": "ae08cc305a7b5c8a3b59827bc29b8f1aa4aa9a2b980924c8516928a595b497c8",
            "search": "159037fb39aa8faf7037d448ef8ef99a68c711d4677b39d066c033260fbdd1a1",
        },
        "fss": {
            "model": "74e426912f24417b3c0e8be8ab6dadbafaafa5c829d51edafae849705f775001",
            "search": "a50eb44deb3cbdf7bda96d9f3df71c12b51695125a9c0f277e04b30ec98571cc",
        },
        "info-as": {
            "model": "b621d6c9bf2b172863fc121fe87dee950c60d2d6cc6d637f5a1ab91ec74588d1",
            "search": "74c2d861742e084d666e176e0fb33bfa7045c419141d8d52a7b058b124f3a1ab",
        },
        "k2": {
            "model": "f7fde6671f21e554dcf1f7aa092af4c5b6775bae481ec016344de7c0873fa44c",
            "search": "61752c1bbbd330ec9d8151470912795992aaa9cae2c064b7bad176a2a3df6b83",
        },
        "k2-as": {
            "model": "64b11fc7175cc08a24b4b17905476c7c0c9c12f0eb3909223f16116713b244c4",
            "search": "0eb2523a86b14086b84c75ffb03e1e7b8c4cf18ff4656b55d85bbe9dbbbf8c78",
        },
        "k2-as-le": {
            "model": "41b1d49ec0dd613fc9cac0fdd3508b87711cb262460dca5f2af030705ce46973",
            "search": "4898f4642b03a7836823481a285719325dbc322efce99219b97258c45544053d",
        },
        "stan": {
            "model": "71bcecd1224de7c51d1ac77f3165b8cd4933f7e8c81bad2d60ac6538111d33ce",
            "search": "257124f54e2a1b0194da36786502dc1255547f1692bb5cd6f25d3a2c19f5b55a",
        },
    },
    "ecoli": {
        "asb": {
            "model": "979d30811658076d9dfe47e06c2d652ef57246e86f8808dc75da14090346bb87",
            "search": "52db7082509f1955c0b91417057223a8924973b554dbc9b46865aee5d965828c",
        },
        "bsej": {
            "model": "250e64b882dda10afd2a3c17a94705e34b6671f99d0a18d33676baca34a8c8a6",
            "search": "b0ce5a67a8671ddfb1ee05fa1b7dd9ad25268345ae3793ebb1ee8eaebab75f10",
        },
        "cb": {
            "model": "80507e1334088e285c789d9eff1deaf6299ffb049a31be81bd47fc8d48705bed",
            "search": "c81f340c9fe204d67c0261a3076c45551d5053f37430ec9c1ff75c5a2390e6b3",
        },
        "ffss": {
            "model": "677343f793f366d7508862c1bd5a88894fc47da19a2edf67965073b16ead0560",
            "search": "4bfead303b96ea64e4f2bc5cb2b637afa8c41fff5c506c64443ff27340423388",
        },
        "fss": {
            "model": "b96f01a8347c0b2c32a761357bfb3564f61c7c78c5098e2c05da88a701b96e2b",
            "search": "5d1fbc46d0a3c34a51a81868795c3cc1737fc56ff3116c42b0c39e69d468ff4a",
        },
        "info-as": {
            "model": "217b36aec325a46b785ad754200fc5f7185cb845e43ebe5c6e329f38d0410625",
            "search": "461b7099920d6aa698ea66ef099453e74a69c2a08135911412ed2f8d4c60ccfa",
        },
        "k2": {
            "model": "5530f897d163e0d8fdb2be3c53140d0ee5e7fb619626115d6a41bda395c80102",
            "search": "98e229336baead4c96066973f0e59ed29e7d3f3b014d6faf74ad805e481966d5",
        },
        "k2-as": {
            "model": "3e3f30ad665d1b19e05513f97e9ceccbf9cbb0d4ccb52c1582694c718dfa9c6b",
            "search": "8bc457f80602ca428aa44c5919464f66d2f9fc53c8d1ce0de9dabc3b2fd485d3",
        },
        "k2-as-le": {
            "model": "fa40d3f941ab772325067db9ebc9ed1a965e3a0d65f9c9bf81e6867aa19d6396",
            "search": "34e52adc421fa7429ea0e9378ace4cd877ea22a37ce21ac09c1b61ac117ae393",
        },
        "stan": {
            "model": "939e4d7d848fb2819ae8ee23a4c80bd811a6ace2bd95fc7f7adc26e91ffbf658",
            "search": "b1d3eadb55e1d6b1d72754d0298864a7f6be774960ca0bc3165c73181d847e70",
        },
    },
    "hepatitis": {
        "asb": {
            "model": "7a989026f880c94754d79fda59ca5d84321807f10402b838c032e31e82e8bcf9",
            "search": "72311bec5fb07fde55534ed13260e46e7257d3aec25b63e02e542e1f2ffa8281",
        },
        "bsej": {
            "model": "346c7ec096e4984758f11b8780c5cf4dffa124ea9bfca91ae0ccd14d2f92af26",
            "search": "1df68fb9a68929c21c67d7e1290b8956fd65a04a38d60cf9782a461214149901",
        },
        "cb": {
            "model": "9436eb3009a58f8e1d8cd3eb73c1ef8ae6e0c9a2c92b464a02bdbd33a325029c",
            "search": "a34ebdbd51ed9640d4d501e487ceb82fa3227fb548fd5e3f2a3adeee21ca2cf3",
        },
        "ffss": {
            "model": "9d5098d31febda8080c5a53f735738a679dd511f92c7633f0f69f11431ffd76b",
            "search": "bc740b72f4d4cad41389d37921e6624f347a605d9ce428484e4e0ae4322b964f",
        },
        "fss": {
            "model": "5f7a11a1cb87662eef490e29f0808b8236ab73576cad540d31f7455889e0bea3",
            "search": "88abdcf70c962d63bc071e3888beb72084f4194c22d68e42fd3324510f2233dd",
        },
        "info-as": {
            "model": "16bd29c1be35d828e7c036bdd13219b31872a1e7732336c151a7afb28db22c08",
            "search": "00ef57086e080e0f2bbe41b821e8d19b0fc4fb7d8832666268ac53a9a4b95a3a",
        },
        "k2": {
            "model": "4935a17a14ce8d6adea06a82af644fb7786e702ff9393691fa54e6beaae6f804",
            "search": "2313fc9e0dd1b88ce39a9e2cf8f363007f77025ca027887dc9f1378b85a98af6",
        },
        "k2-as": {
            "model": "f822f0c61268de73553f5bab958e469444933078d40751795c646d34e47b99d7",
            "search": "eacc01a34db0716fba77994655637d725f1ad65336a7780fb8b48393a431b631",
        },
        "k2-as-le": {
            "model": "d2ebfa26273cf2315e290289c1004ad76b28c361de76dd9be945d3e726cbc742",
            "search": "aa1d46ba57616a52af1c595b9dba8cfe47b1318578e626583aa205484e7a4048",
        },
        "stan": {
            "model": "4fd253ca1738e2a8691193158e5670b1228973d46e95b0bc343a43c5ac7bf372",
            "search": "03e7d76340668b6394b2fb9478f1c21ac2f1dacbf313b8179ea738df23eeb803",
        },
    },
    "kr-vs-kp": {
        "asb": {
            "model": "ef7fff8c1755a1fd005a60b6a8606f09a8165e3efac3965e198289f3b2a6a318",
            "search": "fe9a7bef734e40c0dce865f732eb0c6e7c722c4db0efc921adf24baf1e24576d",
        },
        "bsej": {
            "model": "5deaa1b028d16524b6543953712435ff9b8382a9801fde7a73074d3b8bfef52e",
            "search": "b42950b38d9d881160a20bcf8caaabc218607e603493799ce4710cb29d1ff7cf",
        },
        "cb": {
            "model": "d39a42c7d21e31de043d720400e6096bff6c3460d32cdcdb8eb3e4900126113a",
            "search": "61c2857644d584bfa86caf2a3c9ad4680b4258698f4ba41793ba66ea09fc0015",
        },
        "ffss": {
            "model": "1dc8a21b2b85dd96e6e2e50db19602cea04f6bed657b8e14b6b83ec3e17bb83c",
            "search": "73572386f5d1433e8897436c6ec8aae5df17a490764d8f613f9c7aa5e90124e7",
        },
        "fss": {
            "model": "5fe26f5171bf747608c0063b2e521ab1f2db7ab45de8b504075227f6bf59e8f2",
            "search": "e7391b1bff3192dd64100017b686015def5170c45e416f0e86b733fcaddb1c8b",
        },
        "info-as": {
            "model": "707999299af8d5e174ed6391c649f2a043663bc48c72fdf1f206310924dcb437",
            "search": "ce8c720a34f184abad7cb83c6d7bf0a45d86ff6fac695f9768eb567e4c9acd2a",
        },
        "k2": {
            "model": "efc02fe01d3d248b85f8f1bfcfdd1d0ea9abd1b8c03ceccb89b7e42a5e150071",
            "search": "2ba35f300f59bac04f648710725b68c09a542ca6d9414678a6bf669577634c7f",
        },
        "k2-as": {
            "model": "291d86eb2dcca7d15b4b65c72f11ef208825e16e663cf723c95113c26de8e74c",
            "search": "7227b3cc941c6ce87e568ee8b82119b3616a3ff84e05f2b6a62b2d4a0f21f856",
        },
        "k2-as-le": {
            "model": "ad9795690b69068023d2eeff4a0ec979719c3cb591e6b29c9176c7f261335d0e",
            "search": "dd9aae4d8c23c8dc6694a26aedd1754a05d21dc677df6faaaf1e660ecedef799",
        },
        "stan": {
            "model": "40fd3162a0d1c0de8ae2134c88e66e75c17a9ad5c61cf413231fe9df2aabbdf2",
            "search": "8e213bb756297454c7966a4d43b268e4b7f3b0351f50cd5af5c6221362c3abf6",
        },
    },
    "splice": {
        "asb": {
            "model": "cdaf9be97393d7d6ba4e9fc0312d82c64bccb894560ebc1487caa59457cb1de5",
            "search": "5ec1fd037542b22927e37e69e31558ff8876140dc03574079efd3677aa090664",
        },
        "bsej": {
            "model": "09f59eab155a25b3017ab5e558dffe177d34206562cfe12b151fb3f3cbdc3cce",
            "search": "cd58cb4374a76b6be273fef2778d541c49b1e38e2caf3235405f0cd33299ae2b",
        },
        "cb": {
            "model": "d27d169b963530734ad2d6242045b1c1b08c55076f919cd2c1f31e8dd78d2d01",
            "search": "b59d0e1d5a5dedc989304a3bfd80f7cceab889767f54632479c519a0c4539d2b",
        },
        "ffss": {
            "model": "ace5aa911c22998970f49e7388a6a597dfe2b01ca023389bec82ce524c8bb338",
            "search": "50c2d0c11aa79986e0b6d8c133898a93742f31697d59a63a8094095d2816c4c8",
        },
        "fss": {
            "model": "3518331d14721d1ca3c42a6766f9a4a99e9607c2cab480987226ea7d0e8a7937",
            "search": "b1a073761cee57722bfe1aa84244d25ae9da269f27fd91421f84610ae0879d01",
        },
        "info-as": {
            "model": "39c531b4ee6d613f85663e416daf24abd4980a8f94454a18b839fc6edf43e105",
            "search": "30c343f0cb3ce8bb5afe902760c0af8b4f63e2be3159d87b80f35616ff4aec61",
        },
        "k2": {
            "model": "c215246692dc27911e8ced81bb2e4e0077f1f6d1165238ca50af341f2cf8537e",
            "search": "cc67ccfa4f63abe79ff08dd8e4314f63d858dadb5fbaa793d75aec84a2ff662d",
        },
        "k2-as": {
            "model": "ba0dba0517869e1859391c1cd95b4757d547d6b4dc33139ae89c94bd7b7c2bff",
            "search": "1708c1ab9d2ac735d9b534a0062b4541667d2b6ed0a27b355da92b574f94db47",
        },
        "k2-as-le": {
            "model": "36b7c527e34e0498aa1654d757867c53f6ec1163e042cf4823a8f6f6fc92af03",
            "search": "3a7dfa0dc844dd524fbdc30e7bfe9fca7a776f01db2c961296cc1bb013a0f7eb",
        },
        "stan": {
            "model": "5f1ce33983d1635a9eb4b8016f9099b2655472d0993d3a81bd3aa4a461a0602f",
            "search": "a5c1e8d95b95f0420bf71da3d5a9dbe1731d0b62e88cce51bd00cb9a576f93ce",
        },
    },
    "tic-tac-toe": {
        "asb": {
            "model": "a47720d59316207f8f504b7f1d6e69d1e969e41898774cb0de35cdf86225efc8",
            "search": "b36a658833c4f064fb68a6c6420b14d58b6090095fcd8e55ec5cda3aa61cd838",
        },
        "bsej": {
            "model": "4f863239fe43f01a310d554313264907ae1a27bbfd255ac32cfd40cde091ae84",
            "search": "bccfcff174d89fd4c9573e6330c4dca2bd9ad3ec4186640071fb8ced0626fca3",
        },
        "cb": {
            "model": "e1da7960267993addb9125175fa83fbdc73bf27ad05a190ed4cf8ca455de4c0f",
            "search": "ebbea0dd36b34da45ba4f703a38d4e72ee9578c6709fabbd2f4a28d4ede36450",
        },
        "ffss": {
            "model": "8f1e3317999dcfff7507365e3a6bd4c2aa83bf0fe8aa2cd96485e269a44ea9d0",
            "search": "cba15a5a3bddf010c882714950250cf71ba4142729b5e7295d9a9085e0c47560",
        },
        "fss": {
            "model": "b8dda39640f88c7c9113839ffbb0ae8dfb7917b405c0db2798c548a66696f1e9",
            "search": "2a2cab3f9404b0902335f245f9af698e1ac5d9416cbaa20582cab9f0280e1da8",
        },
        "info-as": {
            "model": "eee583078bbf6dd66f5d7679457000fa8be5c26e291130ae895c70177cae3c7b",
            "search": "94bafac87bada98509ef34bd96b8740c28eb245ad601566d99fa8b75871bae57",
        },
        "k2": {
            "model": "faa2004308b9e29c133dd0036cc25320c040ddf3d3443f4af1efab2e155e670a",
            "search": "8b590761e8f24937a20afcc072df040f7592199b49975904773515939b18869d",
        },
        "k2-as": {
            "model": "b5cade59f1f64d355a0e3b7a4d9710ec825f28320b1bff6cceef0467118e84c8",
            "search": "60ac6e61c235f4d9593a7ee18a25e76be0a30808068c8c15973cede94ffd9eb0",
        },
        "k2-as-le": {
            "model": "d6067ad15582588190dfadd21183853ebc22e7011dedd381611e353b6c29f998",
            "search": "bb7aa29283536bf729f4fcf03832601543d9c72ddc2ddcaea9ed81ee5a78ef2a",
        },
        "stan": {
            "model": "af4ce2354d59917397df609bbcc0f34235a6e2e0ea5496f7c0dd6e757308635a",
            "search": "e8fa0d1b6ac36c2e1da26a1ff9a848be561ccbf7e5800fb450dbf1b9931d86fc",
        },
    },
    "wine": {
        "asb": {
            "model": "049a20347272fa64f8ad4c130abe21d37e92dd333e4e66e137a688213b0d0486",
            "search": "a84092951f156c39d6b1cfc184e30ed5c3b57d1135a7e9d587bd4981a885c9a6",
        },
        "bsej": {
            "model": "1970b76eb89ee91a0113cfa119e93badaff4d981c7fd563a865ebf50fcf8cfdd",
            "search": "3c22eec3676b5ebb5e9905c2270a7478dada2ad11b13ef19fea3705609b13d15",
        },
        "cb": {
            "model": "5ce2076bc429ae001a46253b30f1a0e09438ecbbff7edf55dfe61e0b1ac7dffb",
            "search": "41b37175613417bcf967a64eb1caea0d5dfc71b2faeb4d7f1e86823f9bce6aec",
        },
        "ffss": {
            "model": "8452dbf0b7602f981fd705af67bf0c581a41c9b02724c00ea34fc4d6c805e800",
            "search": "9a1e26effb9243a1fad61993271c3016493e506402f5c9b10c9b6f20899f8225",
        },
        "fss": {
            "model": "9810ea63a39ac57b29a0ef7cbec03ce4ac25831ea4f77384314d7bbe071c5721",
            "search": "3f5ed411152ad4addcf61de9825a858e2ab9d4ddf516f224cbb7c6de5d5097d2",
        },
        "info-as": {
            "model": "43ee4300ffe8be602e4dc8f0b8bea1c964894d54fbcb58d29d15aed7489b3f21",
            "search": "39b1ed6a4251a1a85a468217598a2b497652c47b61363984c6f051a046208855",
        },
        "k2": {
            "model": "c203ee7ed8f09151b7529bcc0ee1d10702e8784044c0f89883ab7014c2ccc7cc",
            "search": "5cb6a8adfbcb9c5e7957516477bd9f0e888759215802f1aa389252924ffb095e",
        },
        "k2-as": {
            "model": "3aceeeabdf1fe068d0d8bff14cb4dbf5e06abc6efc60b5b22933935cd9461f4e",
            "search": "f71cb62b1ea15c068d96a77bba07bf28e4d367e7570ff0764f8014d332604a3b",
        },
        "k2-as-le": {
            "model": "551d2b10425222cf10ed90107168d27e10afaa2a901b226e0cb87c2b8ba1a8d6",
            "search": "f71cb62b1ea15c068d96a77bba07bf28e4d367e7570ff0764f8014d332604a3b",
        },
        "stan": {
            "model": "5f312616f9c0d6faa7656ef5599e9e33e105966a530f9294519c3b0142a5a999",
            "search": "0f4efa0005c1d931f9bc2200fa302a3164ea25a11f592d157541fada703b6003",
        },
    },
}


@pytest.mark.parametrize("name", [*SHIPPED, *SHARED])
def test_models_unchanged(name):
    data = load_rows(name)
    for algo in LEARNERS:
        assert fingerprints(algo, data) == RECORDED[name][algo], f"{algo} on {name}"


@pytest.mark.parametrize("name", ["car", "dermatology"])
@pytest.mark.parametrize("rounding", [wrapper.ROUNDING, 1e-3])
def test_incremental_scores_equal_full_sums(name, rounding, monkeypatch):
    """A candidate scored from the anchor's sum gets the accuracy a fresh scorer (which sums
    it in full) gives: random semi-naive networks, each a few moves from the previous one.
    With a rounding bound blown up to 1e-3 most rows count as near-ties and are summed in
    full, which checks that path too."""
    monkeypatch.setattr(wrapper, "ROUNDING", rounding)
    data = dataset(name)
    rng = np.random.default_rng(0)
    n = len(data.features)
    shared = CrossValidatedAccuracy(data)
    groups = [[i] for i in range(n)]
    for _ in range(60):
        if len(groups) > 1 and rng.random() < 0.5:
            a, b = sorted(rng.choice(len(groups), 2, replace=False))
            groups[a] += groups.pop(b)
        else:
            g = int(rng.integers(len(groups)))
            groups[g] = [i for i in groups[g] if i != int(rng.choice(groups[g]))] or groups[g]
        parents = grouped_parents(data, [tuple(sorted(g)) for g in groups if g])
        assert shared(parents) == CrossValidatedAccuracy(data)(parents)


if __name__ == "__main__":
    table = {name: {algo: fingerprints(algo, load_rows(name)) for algo in LEARNERS} for name in [*SHIPPED, *SHARED]}
    print(json.dumps(table, indent=1, sort_keys=True))
