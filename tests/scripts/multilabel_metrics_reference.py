#!/usr/bin/env python3
"""Prints the scikit-learn reference values of tests/cpu/test_multilabel_metrics.cpp.

Run offline with scikit-learn installed (pip install scikit-learn); the test
hard-codes what it prints (scikit-learn 1.9.1, numpy 2.4.6)."""
import warnings

import numpy as np
import sklearn
from sklearn.metrics import average_precision_score as aps
from sklearn.metrics import roc_auc_score as auc

S = np.array([[0.9,0.4,0.4,0.1],[0.2,0.8,0.5,0.3],[0.6,0.6,0.6,0.2],[0.3,0.7,0.1,0.05],[0.5,0.2,0.9,0.4],[0.35,0.15,0.25,0.45]])
T = np.array([[1,0,1,0],[0,1,0,0],[1,1,0,0],[0,0,1,0],[1,0,1,0],[0,0,0,0]])
defined_rows = T.sum(1) > 0   # rows 0-4 (row 5 has no positive; none is all positive)
defined_cols = T.sum(0) > 0   # labels 0-2 (label 3 has no positive)
r = {}
r['ap_samples'] = aps(T[defined_rows], S[defined_rows], average='samples')
r['auroc_samples'] = auc(T[defined_rows], S[defined_rows], average='samples')
r['ap_macro'] = aps(T[:, defined_cols], S[:, defined_cols], average='macro')
r['auroc_macro'] = auc(T[:, defined_cols], S[:, defined_cols], average='macro')
r['ap_micro'] = aps(T, S, average='micro')
r['auroc_micro'] = auc(T, S, average='micro')
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter('always')
    r['sk_ap_samples_all_rows'] = aps(T, S, average='samples')
    r['sk_ap_macro_all_cols'] = aps(T, S, average='macro')
    print('warnings:', [str(x.message)[:60] for x in w])
# all-positive row
S2 = np.array([[0.1,0.5,0.3],[0.4,0.4,0.2],[0.7,0.1,0.9]]); T2 = np.array([[1,1,1],[0,1,0],[1,0,0]])
r['2_ap_samples'] = aps(T2, S2, average='samples')
r['2_auroc_samples_rows12'] = auc(T2[1:], S2[1:], average='samples')
r['2_ap_macro'] = aps(T2, S2, average='macro')
r['2_auroc_macro'] = auc(T2, S2, average='macro')
r['2_ap_micro'] = aps(T2, S2, average='micro')
r['2_auroc_micro'] = auc(T2, S2, average='micro')
# binary with ties
y = np.array([1,0,1,1,0,0,1,0]); s = np.array([0.8,0.8,0.5,0.3,0.3,0.3,0.1,0.05])
r['bin_ap'] = aps(y, s); r['bin_auc'] = auc(y, s)
print('sklearn', sklearn.__version__, 'numpy', np.__version__)
for k,v in r.items(): print(f'{k} = {v!r}')
