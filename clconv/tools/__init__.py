"""clconv's tools: the command line, the demo, the benchmarks and the shape sets they run.

They use the engine only through its public functions (``clconv.*``, :mod:`clconv.passes`,
:mod:`clconv.planner`, :mod:`clconv.runtime`, :mod:`clconv.reference`, :mod:`clconv.settings`, ...).

=============== ===================================================================================
module          what it is
=============== ===================================================================================
``cli``         the ``clconv`` command line (``python -m clconv``): info, render, check, templates,
                cache; bench, tune and demo are handed to the modules below
``calls``       one op call built from the command line's shapes and options (render, check)
``demo``        the quick start's demo (``scripts/demo``): real layers through ``clconv.conv2d`` and
                its gradients, timed and checked against the float64 reference
``bench``       ``clconv bench`` / ``clconv tune``: argument parsing and the two mains
``timing``      measuring: profiling events, CUDA events, the host clock, streams of calls; one
                layer's passes with clconv and the reference libraries (``bench_layer``)
``libraries``   the reference libraries: PyTorch (cuDNN on a GPU) and a NumPy im2col + BLAS baseline
``report``      benchmark rows: the table and summary, merging runs, CSV / JSON / plot, progress
``first_call``  the cost of a new geometry (cold and warm first call in a fresh process) and the
                host overhead of a cached call (``clconv bench --first-call``)
``shapes``      benchdnn problem descriptors, shape files and the named shape sets
``data/``       the benchdnn shape files ``shapes`` names (oneDNN's, Apache-2.0: ``data/NOTICE``)
=============== ===================================================================================
"""
