"""The wrapper learners and the engines they share (``learners.search``) were made faster
without changing what they learn: every learner below must give, on every data set below,
the model recorded before the speed-ups, bit for bit.

Two fingerprints per (learner, data set), sha256 each:
- ``model``: the structure, parameters, variables and every CPT's bytes
  (``Model.checksum`` with the metadata left out);
- ``search``: the learner's own record of its search (accepted moves, CV accuracies,
  candidates evaluated, CB's orders), i.e. the metadata without what ``fit`` adds
  about the run (creation time, code version, training summary, estimator, arc CMI),
  its numbers to ``DIGITS`` significant digits. Scores such as ffss's p-values come from
  log, exp and special functions whose last bits differ between builds and CPUs (numpy
  picks SIMD kernels by CPU): the CI machine of 2026-11-26 gave ffss's hepatitis
  p-values other last bits than the one that recorded them, with the same model.

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
DIGITS = 9
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
        "search": hashlib.sha256(json.dumps(rounded(search), sort_keys=True).encode()).hexdigest(),
    }


def rounded(value):
    """``value`` (JSON-like) with every float to ``DIGITS`` significant digits."""
    if isinstance(value, float):
        return float(f"{value:.{DIGITS}g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


RECORDED: dict[str, dict[str, dict[str, str]]] = {
    "adult-train": {
        "asb": {
            "model": "d34b38c0b36d86d4cb722f1d7c7b754c9b48a4c27c776104ed702d002f3c1a46",
            "search": "423382e8f61717872a18048ac526b9ba7703b22cf9b51c1c361bc89a3b5cb707",
        },
        "bsej": {
            "model": "28785d4f990e422aa47f68c693b39b4ab259e65cbe4bc2487da1a7d787c25c1c",
            "search": "a2ca163e697ac18ee8359470fe5be86576ab9cacb25e1163550dde3031f84a41",
        },
        "cb": {
            "model": "f833c94b44db091f8ba69cd4f10a7157768464c1fe9e4cd194e566033d7e1629",
            "search": "b47b371382aed1e8e2b3d1b115f1a3a669a6ece3444c866430f6c65adf799a1c",
        },
        "ffss": {
            "model": "03ad446633934885b19596f7c0c93105fb332c19df566b584134114050fbf23d",
            "search": "e15fef1bcfdcbcb4d93dcc09c054a90ead7c468cd11a078058e77f5c89350578",
        },
        "fss": {
            "model": "03a25910f5ecfb75555e3ccbbc3e646d6d532298687d72d4e08f384d700f701c",
            "search": "808bc5d34d3ff54cc79b53bbe25481a7e759ade14a70f1c172c31d73c23500e8",
        },
        "info-as": {
            "model": "d26bf6597b469585a020da379075e09443d26039fdfa2169f6b7d098aced2269",
            "search": "40abdbb1aae3bcb35ba16b5674e774df8afebed4f5dda6a436c7a443a5d04b21",
        },
        "k2": {
            "model": "b26573cfd1ac3e74c1454077ac0efb129260abe1e3fb0a7e41aed5c91867e730",
            "search": "bf2fbcaa0e3f0bd1a7660f12c3af9cc8b8a39306869e0b559d2b02518ab9f84a",
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
            "search": "f8795f9c15d31d502480649d3c30d7d4bad724a4c4ddbe9b1b2624cb11170b01",
        },
    },
    "car": {
        "asb": {
            "model": "b6396245cb9a0bc020c7b36f32a6eaea313ce8bc936eb781f6297b5617b53ef4",
            "search": "43c455d0e1179d2b005292a2f9d2c3369b42fabb32ee46d4272232e76ff3304b",
        },
        "bsej": {
            "model": "59b9d08d77f2bc451cea672592cbdedae4ce75d011e844d76f682417dd33062b",
            "search": "181709e3a7e55599d4c8f1fd420dd1c1eaf0b82ab20bc919ec2e305327fa4eb2",
        },
        "cb": {
            "model": "94a32c693c7275ca510c92f3af57efa6a7b3cc0671d81e047018c6ef39b66e96",
            "search": "a8454d2a0d6c52d585a16f0a42e27740586a7f4cfedf24f90fc62a5ca70d7bca",
        },
        "ffss": {
            "model": "d4ff5880c87cda5a99592a9e66b56db3abf55ffd044458197afbb8b75db8c86f",
            "search": "c618642df1656bed552e2a178f08ac468faa394fb1d1dbe4299104a9cffbc8bc",
        },
        "fss": {
            "model": "37f6eac0215fab848c6c59ff5a2c2559f3bcb5c525d1ee93a581ca7fa26234a1",
            "search": "c5fdb280b682d278c8054e0235a0dff86151a3e16ae61c75f5d4f283ec3022c4",
        },
        "info-as": {
            "model": "5f2ebe6ba1496377a8b1679b883d35a7f6a7f20be2fc9a95839576d3fa695270",
            "search": "59a12be9a2939b89233f7a88dc66a3015b11ddb93e73d0a5f5605676f79e472c",
        },
        "k2": {
            "model": "60028a8e0a3834953e006ed20e0fe3ac1d01e37b8dbeaccaca4d93fa6bfebf53",
            "search": "d78a3810747561a4ab8a5bc0f60debab1b5a68f50e4ebc054dc9b032a563225c",
        },
        "k2-as": {
            "model": "c7d85d838f377da8c500448c3e25affac0d8c1eebf1fc38374cf3abb9df081c4",
            "search": "08ecfe8ef7557d5d307257cb74e6f1ee2e5cd2c8f82a2dd6789fadbd6c5de9d1",
        },
        "k2-as-le": {
            "model": "43bced29b4d8f908b1fbefd4d2ca5dfbc74154e2d714ad10893f1a4dcce1a3e0",
            "search": "46a8ac997d677dd6deccec7fb8ff28bd2b2e3401a1514288f241d1de97bc3f65",
        },
        "stan": {
            "model": "2bbdc01dbf478f4fbcdd0655e2e39921e2f30514196db9b7412ae663e0f59664",
            "search": "142f1a524b147151ae8d6da42ac5f57203c864e845d6118fe5aad317d26b5eb8",
        },
    },
    "connect-4": {
        "asb": {
            "model": "99e3eb492b09ddfbb355b1a02e9b2e6508e8ff4a8e282923e59b6ea27402deba",
            "search": "52381e0f3345fae4ea75812bc8633696aa69cecac0d72767f2342f891fc916c5",
        },
        "bsej": {
            "model": "ee06dd0573cb1e98e874601bed0c695628f3ef2638bf503ed5d4dabb6ef81778",
            "search": "ced27edf7fab51f494ab9d4051a6eff4ae128b8eda2de18a11085b242ed95ae7",
        },
        "cb": {
            "model": "dca91ffb384ba5072333c73ef4e8ae5092995c148117990af2244d415f3f106f",
            "search": "87378055f9dde2385acd898d730ff9a3b391db7d3adb9bf668bc0f052ffc3360",
        },
        "ffss": {
            "model": "e2e2cffc7c459843605adfc1ead4f84b6c02bc9211f685ed46f39c10c760b235",
            "search": "df7e4c2cc1542e08f2de7e7a681f8ba3ab999c7e456d22646abb04a535956ee5",
        },
        "fss": {
            "model": "63a6dad238a395e070d880cbaa9e7d510e500465e1a4b34719ba61d56956e844",
            "search": "c1d5442b13895d1824c43783beadcf091008a43e0f3a425b3aed53724aaec4d5",
        },
        "info-as": {
            "model": "9f6419c527a54589a21a07a4026c7172e4952f5cfc62146333666f8ae80f12ea",
            "search": "aa0d33ff1ece420ba22a3808b22adf453e82ea0a3871ad90c664040a5677ed90",
        },
        "k2": {
            "model": "20e4e6225ffc9b9fdebb27a5d089da8321ef3ecef72789e0ba4b06e61d96b7e8",
            "search": "cd7de45cd6a1e4b94f400bd9963fba7a115e45496ead9d5a6782c622ca9ba027",
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
            "search": "d8f4b7a5094a42527869236e85c911bbe64df7e19f25ea72d90b14c069116428",
        },
    },
    "dermatology": {
        "asb": {
            "model": "6b11bb916dda94d83743f64339a24628789230d215f060d3787abf92d0d6de9c",
            "search": "e9d4301eb1ba13208ef95e85766df1abc261f385e26ddc801ecdf805a9377545",
        },
        "bsej": {
            "model": "366d879abd69d40ef59cbbe8be5ed459337d3b2033e8702456221b7d809d829e",
            "search": "939e71957a64131b06b1acc2a898654b8cf472d8df7d1ef14039079d0eec3cb5",
        },
        "cb": {
            "model": "a841c57ea63118457032b3fd88aa48b9293c8589315bd1440de416c197b6d3d0",
            "search": "9e20cdf0308631396f30ec8e2bf3e5ecf9b9c67954cdf008a7f2726a10927d98",
        },
        "ffss": {
            "model": "ae08cc305a7b5c8a3b59827bc29b8f1aa4aa9a2b980924c8516928a595b497c8",
            "search": "0cfe3e15004266e791c818a17f71037de2a63fc25c2ab70a13f9c2a6ac6a0c25",
        },
        "fss": {
            "model": "74e426912f24417b3c0e8be8ab6dadbafaafa5c829d51edafae849705f775001",
            "search": "db270b625323ee5d8c3c414f06e93b4bcc43701e83f394828fe1b98453730dbc",
        },
        "info-as": {
            "model": "b621d6c9bf2b172863fc121fe87dee950c60d2d6cc6d637f5a1ab91ec74588d1",
            "search": "a28b42d1a4c272a8562cc28a234d68c31f5b217f624998a376b4fff6a325d488",
        },
        "k2": {
            "model": "f7fde6671f21e554dcf1f7aa092af4c5b6775bae481ec016344de7c0873fa44c",
            "search": "6c3d12aa24f760bc2ae2ac6c9311f28131aa63fe0c825bb04f8529863f471dcf",
        },
        "k2-as": {
            "model": "64b11fc7175cc08a24b4b17905476c7c0c9c12f0eb3909223f16116713b244c4",
            "search": "dda8f155bbfc99bca7a57787dd480b9ceaa3ec5e92a6075bf915251f76d0e123",
        },
        "k2-as-le": {
            "model": "41b1d49ec0dd613fc9cac0fdd3508b87711cb262460dca5f2af030705ce46973",
            "search": "e0dab643a00755f176cd2b6885159bb1590c4d9d0f25c2bd03c08c7279560bc7",
        },
        "stan": {
            "model": "71bcecd1224de7c51d1ac77f3165b8cd4933f7e8c81bad2d60ac6538111d33ce",
            "search": "0b8dd395994b5d9877e4c78d5d58bc31e4f662d0e1e78a638fc3efa8e3321998",
        },
    },
    "ecoli": {
        "asb": {
            "model": "979d30811658076d9dfe47e06c2d652ef57246e86f8808dc75da14090346bb87",
            "search": "7b4fe983f157e5288fa56eec9353c178ae7f3900bf8f9ed699842a73b390bffb",
        },
        "bsej": {
            "model": "250e64b882dda10afd2a3c17a94705e34b6671f99d0a18d33676baca34a8c8a6",
            "search": "f5f30a4f5364ccc0ba2abcf96dbfff2e3d0209cb290032b226c519f9ce2c5c57",
        },
        "cb": {
            "model": "80507e1334088e285c789d9eff1deaf6299ffb049a31be81bd47fc8d48705bed",
            "search": "456bc1da2befdbeadcd6a300db3c13426b965a10effbe0a7ac39408298bf7700",
        },
        "ffss": {
            "model": "677343f793f366d7508862c1bd5a88894fc47da19a2edf67965073b16ead0560",
            "search": "0df36fa4ed1ced6533f3da29d6009c4470dfc4c62b096e94a0aff2cf626078d4",
        },
        "fss": {
            "model": "b96f01a8347c0b2c32a761357bfb3564f61c7c78c5098e2c05da88a701b96e2b",
            "search": "87365cd755bbcc7cfb21e047ba4433342af30eebc7d9b88d694def4fd4786e91",
        },
        "info-as": {
            "model": "217b36aec325a46b785ad754200fc5f7185cb845e43ebe5c6e329f38d0410625",
            "search": "9bf445c1d9e1d9f2a5e8b170271c5f8755887289023fc0c54f9a361e3928bbfa",
        },
        "k2": {
            "model": "5530f897d163e0d8fdb2be3c53140d0ee5e7fb619626115d6a41bda395c80102",
            "search": "7981e6baad95fad9da9553b201b70278f25b8f99d6f24bb36ddbfbd1d9150e76",
        },
        "k2-as": {
            "model": "3e3f30ad665d1b19e05513f97e9ceccbf9cbb0d4ccb52c1582694c718dfa9c6b",
            "search": "17867d885cc921391312796ec84c2643eb7a49cf675cc9ad35582bd6f02b60cd",
        },
        "k2-as-le": {
            "model": "fa40d3f941ab772325067db9ebc9ed1a965e3a0d65f9c9bf81e6867aa19d6396",
            "search": "e3b3e1a717a7e6af8cb9404c6ec080e0fde80f5627f3d3fd9b41fbaaae183613",
        },
        "stan": {
            "model": "939e4d7d848fb2819ae8ee23a4c80bd811a6ace2bd95fc7f7adc26e91ffbf658",
            "search": "ce4f1dc8e7a0af02c07bf7a09e2dc83b983ceec009e418c12b0edb80b24a56ff",
        },
    },
    "hepatitis": {
        "asb": {
            "model": "7a989026f880c94754d79fda59ca5d84321807f10402b838c032e31e82e8bcf9",
            "search": "6ac6065a4281cb209e0e1c9cdb4e565d2dd23dd5d009d7dbf32e5592245a01b8",
        },
        "bsej": {
            "model": "346c7ec096e4984758f11b8780c5cf4dffa124ea9bfca91ae0ccd14d2f92af26",
            "search": "dc1aca553a73a3acd4da032cda493874b31efe44ea3161d7f4b14ccba9bf5e0f",
        },
        "cb": {
            "model": "9436eb3009a58f8e1d8cd3eb73c1ef8ae6e0c9a2c92b464a02bdbd33a325029c",
            "search": "5d34f16ff1af25b32cfca9518fd224b2ea6943a4b39980a3708aba327bb045bd",
        },
        "ffss": {
            "model": "9d5098d31febda8080c5a53f735738a679dd511f92c7633f0f69f11431ffd76b",
            "search": "eb892c638e02c6e1389dac496222a8199143f23920b188d8393c0822e275c882",
        },
        "fss": {
            "model": "5f7a11a1cb87662eef490e29f0808b8236ab73576cad540d31f7455889e0bea3",
            "search": "aad5061887978841c2501795fdb6bc877bdee416ecfd7736df031f0f02ff006d",
        },
        "info-as": {
            "model": "16bd29c1be35d828e7c036bdd13219b31872a1e7732336c151a7afb28db22c08",
            "search": "00dcc4047533e37d52fb2098fd712b0414fec87e5dfed48525c4be8d68a564c7",
        },
        "k2": {
            "model": "4935a17a14ce8d6adea06a82af644fb7786e702ff9393691fa54e6beaae6f804",
            "search": "a0047b7a72c3af230765e37daf24aeb181189e5fd7d92d760f943b7f54e486b9",
        },
        "k2-as": {
            "model": "f822f0c61268de73553f5bab958e469444933078d40751795c646d34e47b99d7",
            "search": "543827dcc5da6acf7f41a48a26fc2d9ea40f6110fd219f668d13646822d8c48b",
        },
        "k2-as-le": {
            "model": "d2ebfa26273cf2315e290289c1004ad76b28c361de76dd9be945d3e726cbc742",
            "search": "214683759d4226d34f301f68fb8d96d31e0666752989f8eb11d229affef5eea4",
        },
        "stan": {
            "model": "4fd253ca1738e2a8691193158e5670b1228973d46e95b0bc343a43c5ac7bf372",
            "search": "13c683292ab81db8fed2d9aa5258b1f250e9c3e0215fc6de5b8e3db72e0879d7",
        },
    },
    "kr-vs-kp": {
        "asb": {
            "model": "ef7fff8c1755a1fd005a60b6a8606f09a8165e3efac3965e198289f3b2a6a318",
            "search": "a8d033ce37f28ee679079de3c0fe7a54a8473a88d82fffc1f20fa2aac804bff5",
        },
        "bsej": {
            "model": "5deaa1b028d16524b6543953712435ff9b8382a9801fde7a73074d3b8bfef52e",
            "search": "2373ff928bdf68cc7e06b1953e7a6423daa2bc29f3311b33242f78bc7b9b503a",
        },
        "cb": {
            "model": "d39a42c7d21e31de043d720400e6096bff6c3460d32cdcdb8eb3e4900126113a",
            "search": "0d6e7228ddca4054117c8eb92a065db16347096a5c2eb72fb8cac6969914424b",
        },
        "ffss": {
            "model": "1dc8a21b2b85dd96e6e2e50db19602cea04f6bed657b8e14b6b83ec3e17bb83c",
            "search": "9dd46d8331a9c3943a0fdc063d7c93fdfd9f178df6c923af8d4892680ea9c93b",
        },
        "fss": {
            "model": "5fe26f5171bf747608c0063b2e521ab1f2db7ab45de8b504075227f6bf59e8f2",
            "search": "17315edae2727cdfd0edec37d1a29432732db43536729217c23f5674ef1b57f7",
        },
        "info-as": {
            "model": "707999299af8d5e174ed6391c649f2a043663bc48c72fdf1f206310924dcb437",
            "search": "2d7601d25ce29326dfaa1f54da1ae40d93f045e73ec7e9a77919ef0c13f358d8",
        },
        "k2": {
            "model": "efc02fe01d3d248b85f8f1bfcfdd1d0ea9abd1b8c03ceccb89b7e42a5e150071",
            "search": "ac37542ac201bfefa841f632a3adcd90d804f9473c4ccecf66c9d7be355c1e02",
        },
        "k2-as": {
            "model": "291d86eb2dcca7d15b4b65c72f11ef208825e16e663cf723c95113c26de8e74c",
            "search": "0782a9c2cc54a69d012efe487e8f813936a149bd91cb127fbf0dd5f3de677a99",
        },
        "k2-as-le": {
            "model": "ad9795690b69068023d2eeff4a0ec979719c3cb591e6b29c9176c7f261335d0e",
            "search": "d45ce859be641e640752c2ecd9bddd2956233bc0bfd26af2437508f449b370d8",
        },
        "stan": {
            "model": "40fd3162a0d1c0de8ae2134c88e66e75c17a9ad5c61cf413231fe9df2aabbdf2",
            "search": "4f3d21d512374127fc20fc3e41e5fe5feff43649a1dcef9e0fd1a3723db7daf4",
        },
    },
    "splice": {
        "asb": {
            "model": "cdaf9be97393d7d6ba4e9fc0312d82c64bccb894560ebc1487caa59457cb1de5",
            "search": "ee6face0df49da44f052edd8840b5fb14bf963fe297e5abfd532f973ea22469a",
        },
        "bsej": {
            "model": "09f59eab155a25b3017ab5e558dffe177d34206562cfe12b151fb3f3cbdc3cce",
            "search": "d54e859fd283b03aa5255cb2411ace68bea600664e8f49100899fb89d151698f",
        },
        "cb": {
            "model": "d27d169b963530734ad2d6242045b1c1b08c55076f919cd2c1f31e8dd78d2d01",
            "search": "ca21a65901614bb557fb677618ba25cb0709b619a665f8fb61441f410e2dd2a7",
        },
        "ffss": {
            "model": "ace5aa911c22998970f49e7388a6a597dfe2b01ca023389bec82ce524c8bb338",
            "search": "49109e306bd04f566953c6970b4e3a3928dc903427dd5be1ff2471703f3b0426",
        },
        "fss": {
            "model": "3518331d14721d1ca3c42a6766f9a4a99e9607c2cab480987226ea7d0e8a7937",
            "search": "48725de60417d5b6f5b58b98cafc7a6af9a4bc5beea13d4b703fcaaa5bd46d05",
        },
        "info-as": {
            "model": "39c531b4ee6d613f85663e416daf24abd4980a8f94454a18b839fc6edf43e105",
            "search": "38f841a0d2d94c925c5ce8870410ea4f61d000bd96abcc04d5d9353777fca41a",
        },
        "k2": {
            "model": "c215246692dc27911e8ced81bb2e4e0077f1f6d1165238ca50af341f2cf8537e",
            "search": "132243a13ba8afb7304bd98ce0cb1aed80967b9c26bb4e61117b06dbc599684c",
        },
        "k2-as": {
            "model": "ba0dba0517869e1859391c1cd95b4757d547d6b4dc33139ae89c94bd7b7c2bff",
            "search": "1dda765762d22ccafc2cfd4830bb16784b56859189681203bbaabd7b9ccecd5d",
        },
        "k2-as-le": {
            "model": "36b7c527e34e0498aa1654d757867c53f6ec1163e042cf4823a8f6f6fc92af03",
            "search": "e5f04d8a16c3d0639ebb4e79eae84312993a68b691047a3409a758de0a2edd48",
        },
        "stan": {
            "model": "5f1ce33983d1635a9eb4b8016f9099b2655472d0993d3a81bd3aa4a461a0602f",
            "search": "23f2012dbb346d64d22712678606c3c76c1e427a09275eaca5d342396a5a959d",
        },
    },
    "tic-tac-toe": {
        "asb": {
            "model": "a47720d59316207f8f504b7f1d6e69d1e969e41898774cb0de35cdf86225efc8",
            "search": "61d5bf5aa31e902ac186152ac5e56589bd60fe567ff46860ba03be4ea69a92ac",
        },
        "bsej": {
            "model": "4f863239fe43f01a310d554313264907ae1a27bbfd255ac32cfd40cde091ae84",
            "search": "5c3ad9c8513ab21c16b05e7cef7a65a6cf2e46117e5d0a2e838a6b7b8a53c36b",
        },
        "cb": {
            "model": "e1da7960267993addb9125175fa83fbdc73bf27ad05a190ed4cf8ca455de4c0f",
            "search": "def48da098a0e3d7bc0a7d6d5b60fabe88352420d1b12f9d33fa7bef968a8e29",
        },
        "ffss": {
            "model": "8f1e3317999dcfff7507365e3a6bd4c2aa83bf0fe8aa2cd96485e269a44ea9d0",
            "search": "2b6f59bd116851858ce412a2b641fefd01b328a16b9f5c41aeb964f84d6f2ea9",
        },
        "fss": {
            "model": "b8dda39640f88c7c9113839ffbb0ae8dfb7917b405c0db2798c548a66696f1e9",
            "search": "e88b95699b73424a9cac6d55f1baee1fa04adc093fb97588ee43aac9ae5f28a0",
        },
        "info-as": {
            "model": "eee583078bbf6dd66f5d7679457000fa8be5c26e291130ae895c70177cae3c7b",
            "search": "746625cc803953ac32dd5d47f6355cb6cdb822b025d4321f3e8987707bb0e5c9",
        },
        "k2": {
            "model": "faa2004308b9e29c133dd0036cc25320c040ddf3d3443f4af1efab2e155e670a",
            "search": "0aa45d7c19cb62cc6808dee7eae08586fb61335b2e505d3fcfc717b7e4cdc0f4",
        },
        "k2-as": {
            "model": "b5cade59f1f64d355a0e3b7a4d9710ec825f28320b1bff6cceef0467118e84c8",
            "search": "23f65a61e57f4e91413eaee0c74e9a539df198eff4f6a1d0c3e9006230c3aa00",
        },
        "k2-as-le": {
            "model": "d6067ad15582588190dfadd21183853ebc22e7011dedd381611e353b6c29f998",
            "search": "1d5ece02a67541d7290dacfd9016997e4bb1f4a6f1b9ef99bb12498b46b3f356",
        },
        "stan": {
            "model": "af4ce2354d59917397df609bbcc0f34235a6e2e0ea5496f7c0dd6e757308635a",
            "search": "0d4e5317ff5f07288b1c411a81ee06e9306ae6444383ebcd9fb12c7bd153bf4d",
        },
    },
    "wine": {
        "asb": {
            "model": "049a20347272fa64f8ad4c130abe21d37e92dd333e4e66e137a688213b0d0486",
            "search": "08f51253c294cef640bc63613cc1d223ccf629d1fbd20f05fbbdb94c3a0ab5a9",
        },
        "bsej": {
            "model": "1970b76eb89ee91a0113cfa119e93badaff4d981c7fd563a865ebf50fcf8cfdd",
            "search": "fcecebfda510fdb640568b36a6424dfc70c39d8a6ba5b106bbe906cd1e5fb911",
        },
        "cb": {
            "model": "5ce2076bc429ae001a46253b30f1a0e09438ecbbff7edf55dfe61e0b1ac7dffb",
            "search": "5dd67ad05232390410b3234755a7fc0ac7bde0be60231b0971871a0d99f5282a",
        },
        "ffss": {
            "model": "8452dbf0b7602f981fd705af67bf0c581a41c9b02724c00ea34fc4d6c805e800",
            "search": "7805f3a2876072d9a03829e4fd7a5d86b70065163072f264a342485070d32a32",
        },
        "fss": {
            "model": "9810ea63a39ac57b29a0ef7cbec03ce4ac25831ea4f77384314d7bbe071c5721",
            "search": "16b4cef107cb96f1ddf599684339444008bcb54e5401ec63e6703f6f6c7d35c1",
        },
        "info-as": {
            "model": "43ee4300ffe8be602e4dc8f0b8bea1c964894d54fbcb58d29d15aed7489b3f21",
            "search": "7f61451ab82109925e61efe7271fef9b0651a261d3f277401ac13e5f8c7c72cb",
        },
        "k2": {
            "model": "c203ee7ed8f09151b7529bcc0ee1d10702e8784044c0f89883ab7014c2ccc7cc",
            "search": "72369a2afdb2baf115ed9b7d566ffd5a74beba7e25943f0febfedcc380010506",
        },
        "k2-as": {
            "model": "3aceeeabdf1fe068d0d8bff14cb4dbf5e06abc6efc60b5b22933935cd9461f4e",
            "search": "22939284ba5a94dcdda1b9577fcdb74533b75978521ea83bc9435f31d6ed3d78",
        },
        "k2-as-le": {
            "model": "551d2b10425222cf10ed90107168d27e10afaa2a901b226e0cb87c2b8ba1a8d6",
            "search": "22939284ba5a94dcdda1b9577fcdb74533b75978521ea83bc9435f31d6ed3d78",
        },
        "stan": {
            "model": "5f312616f9c0d6faa7656ef5599e9e33e105966a530f9294519c3b0142a5a999",
            "search": "945afea9c11cd1ef5b070e163ad53e26de3080545b6c82b484596cb1c696d319",
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
