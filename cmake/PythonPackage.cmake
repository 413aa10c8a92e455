# What `pip install .` / `pip wheel .` put into the package (scikit-build-core runs
# `cmake --install` into the wheel): the Python sources and the libraries built for
# this environment (the core, _core, and the TensorFlow, JAX and NCCL parts that
# configuring found). lockstep_beside_core installs the libraries that load the core;
# the core itself and the sources are installed here.
install(TARGETS lockstep_core LIBRARY DESTINATION lockstep)
# Sources only: libraries a `make build` left in the checkout's python/lockstep are
# not this build's.
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/python/lockstep/ DESTINATION lockstep
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
